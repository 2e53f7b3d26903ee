package sandbox_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/sandbox"
)

// idempotent checks, on any recorder, that a send repeated with the same
// idempotency key (and recipient) is answered with the first call's message id
// and recorded once, singly and in batches, while a push to another device of
// the same notification is a message of its own.
func idempotent(t *testing.T, rec sandbox.Recorder, tenant string) {
	t.Helper()
	ctx := context.Background()
	p := sandbox.New(rec)
	tags := func(id string, ch herald.Channel) providers.Tags {
		return providers.Tags{TenantID: tenant, NotificationID: id, Channel: ch}
	}

	email := tags("ntf_a", herald.ChannelEmail)
	first, err := p.SendEmail(ctx, providers.EmailMessage{To: "a@example.com", Subject: "Hi", Text: "hi"}, email.IdempotencyKey(), email)
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.SendEmail(ctx, providers.EmailMessage{To: "a@example.com", Subject: "Hi", Text: "hi"}, email.IdempotencyKey(), email)
	if err != nil || again != first {
		t.Fatalf("the same email again: %+v %v; want the first call's %+v", again, err, first)
	}

	sms := tags("ntf_a", herald.ChannelSMS)
	s1, err := p.SendSMS(ctx, providers.SMSMessage{To: "+14155552671", Body: "hi"}, "", sms)
	if err != nil {
		t.Fatal(err)
	}
	if s2, err := p.SendSMS(ctx, providers.SMSMessage{To: "+14155552671", Body: "hi"}, "", sms); err != nil || s2 != s1 || s1 == first {
		t.Fatalf("the same SMS again: %+v %v; want the first call's %+v (not the email's %+v)", s2, err, s1, first)
	}

	// Push goes to each of the user's devices under the notification's one key:
	// a device is a message of its own, a repeat to one device is not.
	push := tags("ntf_a", herald.ChannelPush)
	d1, err := p.SendPush(ctx, providers.PushMessage{Token: "tok-1", Title: "T", Body: "B"}, push.IdempotencyKey(), push)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := p.SendPush(ctx, providers.PushMessage{Token: "tok-2", Title: "T", Body: "B"}, push.IdempotencyKey(), push)
	if err != nil || d2 == d1 {
		t.Fatalf("push to a second device: %+v %v; want a message other than the first device's %+v", d2, err, d1)
	}
	if again, err := p.SendPush(ctx, providers.PushMessage{Token: "tok-1", Title: "T", Body: "B"}, push.IdempotencyKey(), push); err != nil || again != d1 {
		t.Fatalf("the same push again: %+v %v; want %+v", again, err, d1)
	}

	// A batch overlapping an earlier single send, twice.
	to := []providers.BatchRecipient{
		{To: "a@example.com", Tags: email},
		{To: "b@example.com", Tags: tags("ntf_b", herald.ChannelEmail)},
		{To: "c@example.com", Tags: tags("ntf_c", herald.ChannelEmail)},
	}
	b1, err := p.SendEmailBatch(ctx, providers.EmailMessage{Subject: "Sale", Text: "20% off"}, to)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(to)
	if b2, err := p.SendEmailBatch(ctx, providers.EmailMessage{Subject: "Sale", Text: "20% off"}, to); err != nil || b2 != b1 {
		t.Fatalf("the same batch again: %+v %v; want %+v", b2, err, b1)
	}
	// A single send after the batch answers the batch's message of that recipient.
	c := tags("ntf_c", herald.ChannelEmail)
	single, err := p.SendEmail(ctx, providers.EmailMessage{To: "c@example.com", Subject: "Sale", Text: "20% off"}, c.IdempotencyKey(), c)
	if err != nil {
		t.Fatal(err)
	}

	msgs, err := rec.List(ctx, tenant, 100)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string][]sandbox.Message{}
	for _, m := range msgs {
		k := m.IdempotencyKey + " " + m.Recipient
		byKey[k] = append(byKey[k], m)
	}
	want := map[string]string{
		"ntf_a:email a@example.com": first.ProviderMessageID, "ntf_a:sms +14155552671": s1.ProviderMessageID,
		"ntf_a:push tok-1": d1.ProviderMessageID, "ntf_a:push tok-2": d2.ProviderMessageID,
		"ntf_b:email b@example.com": "", "ntf_c:email c@example.com": single.ProviderMessageID,
	}
	if len(msgs) != len(want) {
		t.Fatalf("%d messages recorded, want %d (one per key and recipient): %+v", len(msgs), len(want), msgs)
	}
	for k, id := range want {
		got := byKey[k]
		if len(got) != 1 {
			t.Fatalf("%s: %d messages, want 1", k, len(got))
		}
		if id != "" && "sandbox-"+strconv.FormatInt(got[0].ID, 10) != id {
			t.Errorf("%s: message %d, want %s", k, got[0].ID, id)
		}
	}
	// The batch's id is its first message's: the same for the repeat.
	minID := min(byKey["ntf_a:email a@example.com"][0].ID, byKey["ntf_b:email b@example.com"][0].ID, byKey["ntf_c:email c@example.com"][0].ID)
	if b1.ProviderMessageID != "sandbox-batch-"+strconv.FormatInt(minID, 10) {
		t.Errorf("batch id %s, want sandbox-batch-%d", b1.ProviderMessageID, minID)
	}
}

func TestMemoryRecorderIsIdempotent(t *testing.T) {
	idempotent(t, &sandbox.MemoryRecorder{}, "t1")
}

func TestPostgresRecorderIsIdempotent(t *testing.T) {
	ctx := context.Background()
	tx, err := testenv.Pool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	tenant := testenv.UniqueName(t, "t")
	if _, err := tx.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ($1, 'x')`, tenant); err != nil {
		t.Fatal(err)
	}
	idempotent(t, sandbox.NewPGRecorder(tx), tenant)
	calls := map[string]int{}
	rows, err := tx.Query(ctx, `SELECT idempotency_key || ' ' || recipient, calls FROM sandbox_messages WHERE tenant_id = $1`, tenant)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		calls[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// Every call is counted on the message it was answered with: a repeat is
	// still visible (a provider without idempotency would have sent it again).
	want := map[string]int{"ntf_a:email a@example.com": 4, "ntf_a:sms +14155552671": 2, "ntf_a:push tok-1": 2,
		"ntf_a:push tok-2": 1, "ntf_b:email b@example.com": 2, "ntf_c:email c@example.com": 3}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
}

// pgTenant creates a tenant on the pool (not in a transaction: concurrent sends
// need their own connections), deleted with its rows when the test ends.
func pgTenant(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	tenant := testenv.UniqueName(t, "t")
	if _, err := pool.Exec(context.Background(), `INSERT INTO tenants (id, name) VALUES ($1, 'x')`, tenant); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DELETE FROM tenants WHERE id = $1`, tenant) })
	return tenant
}

func countRows(t *testing.T, db dbx.DB, tenant string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM sandbox_messages WHERE tenant_id = $1`, tenant).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPostgresRecorderConcurrentSends: identical sends at once (a retry racing
// the attempt it replaces) record one message and all get its id; batches of
// the same recipients in opposite orders at once neither duplicate nor deadlock.
func TestPostgresRecorderConcurrentSends(t *testing.T) {
	pool := testenv.Pool(t)
	tenant := pgTenant(t, pool)
	p := sandbox.New(sandbox.NewPGRecorder(pool))
	ctx := context.Background()
	sms := providers.Tags{TenantID: tenant, NotificationID: "ntf_race", Channel: herald.ChannelSMS}

	const n = 16
	results := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			res, err := p.SendSMS(ctx, providers.SMSMessage{To: "+14155552671", Body: "race"}, sms.IdempotencyKey(), sms)
			results[i], errs[i] = res.ProviderMessageID, err
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || results[i] != results[0] || !strings.HasPrefix(results[i], "sandbox-") {
			t.Fatalf("send %d: %q %v; want %q like every other", i, results[i], errs[i], results[0])
		}
	}
	if got := countRows(t, pool, tenant); got != 1 {
		t.Fatalf("%d concurrent identical sends recorded %d messages, want 1", n, got)
	}

	var to []providers.BatchRecipient
	for i := range 200 {
		id := fmt.Sprintf("ntf_%03d", i)
		to = append(to, providers.BatchRecipient{To: id + "@example.com",
			Tags: providers.Tags{TenantID: tenant, NotificationID: id, Channel: herald.ChannelEmail}})
	}
	rev := slices.Clone(to)
	slices.Reverse(rev)
	batches := make([]providers.Result, 8)
	start = make(chan struct{})
	for i := range batches {
		list := to
		if i%2 == 1 {
			list = rev
		}
		wg.Go(func() {
			<-start
			batches[i], errs[i] = p.SendEmailBatch(ctx, providers.EmailMessage{Subject: "S", Text: "x"}, list)
		})
	}
	close(start)
	wg.Wait()
	for i := range batches {
		if errs[i] != nil || batches[i] != batches[0] {
			t.Fatalf("batch %d: %+v %v; want %+v like every other", i, batches[i], errs[i], batches[0])
		}
	}
	if got := countRows(t, pool, tenant); got != 1+len(to) {
		t.Fatalf("%d concurrent batches of %d recipients: %d messages in all, want %d", len(batches), len(to), got, 1+len(to))
	}
}

// TestPostgresRecorderWritesReceipts: the PostgreSQL recorder records, with an
// email or SMS of a notification the tenant has, an "accepted" receipt naming it
// (as SendGrid's processed event and Twilio's status callback do), so the
// delivery guard's receipt check (providers.Store.LatestReceipt, and
// LatestReceipts for a campaign batch) finds a send whose answer was lost.
// Push gets none (FCM sends none; one would end a push to several devices at the
// first).
func TestPostgresRecorderWritesReceipts(t *testing.T) {
	ctx := context.Background()
	tx, err := testenv.Pool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	tenant := testenv.UniqueName(t, "t")
	if _, err := tx.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ($1, 'x')`, tenant); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ntf_1", "ntf_2", "ntf_3"} {
		if _, err := tx.Exec(ctx, `
			INSERT INTO notifications (tenant_id, id, user_id, template_id, channels, workflow_id, run_id, dedup_key_hash, status, accepted_at)
			VALUES ($1, $2, 'u', 'tpl', '{email,sms,push}', 'wf', 'run', 'h', 'accepted', now())`, tenant, id); err != nil {
			t.Fatal(err)
		}
	}
	p := sandbox.New(sandbox.NewPGRecorder(tx))
	store := providers.NewStore(tx, nil)
	tags := func(id string, ch herald.Channel) providers.Tags {
		return providers.Tags{TenantID: tenant, NotificationID: id, Channel: ch}
	}

	email, sms, push := tags("ntf_1", herald.ChannelEmail), tags("ntf_1", herald.ChannelSMS), tags("ntf_1", herald.ChannelPush)
	sent := map[herald.Channel]providers.Result{}
	for range 2 {
		if sent["email"], err = p.SendEmail(ctx, providers.EmailMessage{To: "a@example.com", Subject: "S", Text: "x"}, email.IdempotencyKey(), email); err != nil {
			t.Fatal(err)
		}
		if sent["sms"], err = p.SendSMS(ctx, providers.SMSMessage{To: "+14155552671", Body: "x"}, sms.IdempotencyKey(), sms); err != nil {
			t.Fatal(err)
		}
		if _, err = p.SendPush(ctx, providers.PushMessage{Token: "tok", Body: "x"}, push.IdempotencyKey(), push); err != nil {
			t.Fatal(err)
		}
	}
	for _, ch := range []herald.Channel{herald.ChannelEmail, herald.ChannelSMS} {
		r, ok, err := store.LatestReceipt(ctx, tenant, "ntf_1", ch)
		if err != nil || !ok || r.Provider != sandbox.Name || r.Status != providers.ReceiptAccepted || r.ProviderMessageID != sent[ch].ProviderMessageID {
			t.Fatalf("%s receipt %+v %v %v; want the sandbox's accepted receipt of %s", ch, r, ok, err, sent[ch].ProviderMessageID)
		}
	}
	if r, ok, err := store.LatestReceipt(ctx, tenant, "ntf_1", herald.ChannelPush); err != nil || ok {
		t.Fatalf("push receipt %+v %v %v; want none", r, ok, err)
	}

	to := []providers.BatchRecipient{{To: "b@example.com", Tags: tags("ntf_2", herald.ChannelEmail)}, {To: "c@example.com", Tags: tags("ntf_3", herald.ChannelEmail)},
		{To: "d@example.com", Tags: tags("ntf_unknown", herald.ChannelEmail)}}
	for range 2 {
		if _, err := p.SendEmailBatch(ctx, providers.EmailMessage{Subject: "S", Text: "x"}, to); err != nil {
			t.Fatal(err)
		}
	}
	got, err := store.LatestReceipts(ctx, tenant, []string{"ntf_1", "ntf_2", "ntf_3", "ntf_unknown"}, herald.ChannelEmail)
	if err != nil || len(got) != 3 || got["ntf_2"].Status != providers.ReceiptAccepted || got["ntf_3"].Provider != sandbox.Name {
		t.Fatalf("batch receipts %+v %v; want ntf_1..3's (a notification the tenant does not have gets none)", got, err)
	}
	var receipts int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM provider_receipts WHERE tenant_id = $1`, tenant).Scan(&receipts); err != nil || receipts != 4 {
		t.Fatalf("%d receipts (%v), want 4: one per message, none for a repeat", receipts, err)
	}
}
