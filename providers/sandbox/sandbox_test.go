package sandbox_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/sandbox"
)

func exercise(t *testing.T, rec sandbox.Recorder, tenant, other string) {
	t.Helper()
	ctx := context.Background()
	p := sandbox.New(rec)
	email := providers.Tags{TenantID: tenant, NotificationID: "ntf_1", Channel: herald.ChannelEmail}
	res, err := p.SendEmail(ctx, providers.EmailMessage{To: "a@example.com", Subject: "Hi", HTML: "<p>hi</p>"}, email.IdempotencyKey(), email)
	if err != nil || res.Provider != "sandbox" || !strings.HasPrefix(res.ProviderMessageID, "sandbox-") {
		t.Fatalf("email: %+v %v", res, err)
	}
	sms := providers.Tags{TenantID: tenant, NotificationID: "ntf_1", Channel: herald.ChannelSMS}
	first, err := p.SendSMS(ctx, providers.SMSMessage{To: "+14155552671", Body: "hi sms"}, "", sms)
	if err != nil {
		t.Fatal(err)
	}
	push := providers.Tags{TenantID: other, NotificationID: "ntf_9", Channel: herald.ChannelPush}
	if _, err := p.SendPush(ctx, providers.PushMessage{Token: "tok", Title: "T", Body: "B", Data: map[string]string{"k": "v"}}, "", push); err != nil {
		t.Fatal(err)
	}
	// A repeat is answered with the first call's message and counted on it, not
	// recorded again (more in idempotency_test.go).
	if again, err := p.SendSMS(ctx, providers.SMSMessage{To: "+14155552671", Body: "hi sms"}, "", sms); err != nil || again != first {
		t.Fatalf("the same SMS again: %+v %v; want %+v", again, err, first)
	}
	if _, err := p.SendPush(ctx, providers.PushMessage{}, "", push); !providers.IsDeadToken(err) {
		t.Fatalf("empty token: %v", err)
	}
	if _, err := p.SendEmail(ctx, providers.EmailMessage{Subject: "x", Text: "x"}, "", email); !providers.IsPermanent(err) {
		t.Fatalf("no recipient: %v", err)
	}

	msgs, err := rec.List(ctx, tenant, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 {
		t.Fatalf("tenant has %d messages, want 2: %+v", len(msgs), msgs)
	}
	newest, oldest := msgs[0], msgs[1]
	if newest.Channel != "sms" || newest.IdempotencyKey != "ntf_1:sms" || newest.Body != "hi sms" || newest.ID <= oldest.ID || newest.Calls != 2 || oldest.Calls != 1 {
		t.Fatalf("newest %+v", newest)
	}
	if oldest.Channel != "email" || oldest.Subject != "Hi" || oldest.Body != "<p>hi</p>" || oldest.Recipient != "a@example.com" || oldest.CreatedAt.IsZero() {
		t.Fatalf("oldest %+v", oldest)
	}
	var payload providers.EmailMessage
	if err := json.Unmarshal(oldest.Payload, &payload); err != nil || payload.HTML != "<p>hi</p>" {
		t.Fatalf("payload %s %v", oldest.Payload, err)
	}
	if one, _ := rec.List(ctx, tenant, 1); len(one) != 1 || one[0].ID != newest.ID {
		t.Fatalf("limit 1: %+v", one)
	}
	if others, _ := rec.List(ctx, other, 0); len(others) != 1 || others[0].Subject != "T" || others[0].Recipient != "tok" {
		t.Fatalf("other tenant: %+v", others)
	}
}

func TestMemoryRecorder(t *testing.T) {
	exercise(t, &sandbox.MemoryRecorder{}, "t1", "t2")
}

func TestPostgresRecorder(t *testing.T) {
	pool := testenv.Pool(t)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	tenant, other := testenv.UniqueName(t, "t"), testenv.UniqueName(t, "o")
	for _, id := range []string{tenant, other} {
		if _, err := tx.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ($1, 'x')`, id); err != nil {
			t.Fatal(err)
		}
	}
	exercise(t, sandbox.NewPGRecorder(tx), tenant, other)
}

func TestClampLimit(t *testing.T) {
	for in, want := range map[int]int{-1: 50, 0: 50, 1: 1, 500: 500, 501: 50} {
		if got := sandbox.ClampLimit(in); got != want {
			t.Errorf("ClampLimit(%d) = %d", in, got)
		}
	}
}
