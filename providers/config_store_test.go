package providers_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/secrets"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/providers"
)

// dbTx returns a transaction on the test database, rolled back when the test ends.
func dbTx(t *testing.T) pgx.Tx {
	t.Helper()
	pool := testenv.Pool(t)
	tx, err := pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

func keyring(t *testing.T) *secrets.Keyring {
	t.Helper()
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	k, err := secrets.New(raw)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// seed creates a tenant with a user and one notification.
func seed(t *testing.T, tx pgx.Tx, tenant string) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO tenants (id, name) VALUES ($1, 'test')`,
		`INSERT INTO users (tenant_id, user_id, email) VALUES ($1, 'u1', 'u1@example.com')`,
		`INSERT INTO users (tenant_id, user_id, email) VALUES ($1, 'u2', 'u2@example.com')`,
		`INSERT INTO notifications (tenant_id, id, user_id, template_id, channels, workflow_id, run_id, dedup_key_hash, status, accepted_at)
		 VALUES ($1, 'ntf_1', 'u1', 'tpl', '{email,sms}', 'wf', 'run', 'h', 'queued', now())`,
	} {
		if _, err := tx.Exec(ctx, q, tenant); err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
}

func TestProviderConfigSecretsAreSealedAndBoundToTheRow(t *testing.T) {
	tx := dbTx(t)
	ctx := context.Background()
	tenant, other := testenv.UniqueName(t, "t"), testenv.UniqueName(t, "u")
	seed(t, tx, tenant)
	seed(t, tx, other)
	s := providers.NewStore(tx, keyring(t))

	cfg := providers.ProviderConfig{TenantID: tenant, Channel: "email", Provider: "sendgrid", Enabled: true,
		Settings: json.RawMessage(`{"from":"noreply@acme.example"}`), Secret: []byte(`{"api_key":"SG.very-secret"}`)}
	if err := s.PutProviderConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	var raw []byte
	if err := tx.QueryRow(ctx, `SELECT secret_ciphertext FROM provider_configs WHERE tenant_id = $1`, tenant).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) == 0 || strings.Contains(string(raw), "very-secret") {
		t.Fatalf("secret stored in the clear: %q", raw)
	}
	got, err := s.GetProviderConfig(ctx, tenant, "email", "sendgrid")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Secret) != `{"api_key":"SG.very-secret"}` || !got.HasSecret || string(got.Settings) != `{"from": "noreply@acme.example"}` {
		t.Fatalf("got %+v secret %q", got, got.Secret)
	}
	if s := fmt.Sprint(got); strings.Contains(s, "very-secret") {
		t.Fatalf("String() leaks the secret: %s", s)
	}

	// A Put without a secret keeps the stored one.
	cfg.Secret, cfg.Settings = nil, json.RawMessage(`{"from":"hello@acme.example"}`)
	if err := s.PutProviderConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetProviderConfig(ctx, tenant, "email", "sendgrid")
	if string(got.Secret) != `{"api_key":"SG.very-secret"}` || !strings.Contains(string(got.Settings), "hello@") {
		t.Fatalf("after update: %+v %q", got, got.Secret)
	}

	// Copying the ciphertext to another tenant's row does not give that tenant the secret.
	if _, err := tx.Exec(ctx, `INSERT INTO provider_configs (tenant_id, channel, provider, secret_ciphertext)
		SELECT $2, channel, provider, secret_ciphertext FROM provider_configs WHERE tenant_id = $1`, tenant, other); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetProviderConfig(ctx, other, "email", "sendgrid"); !errors.Is(err, secrets.ErrOpen) {
		t.Fatalf("moved ciphertext: err = %v", err)
	}

	// Another keyring cannot open it.
	if _, err := providers.NewStore(tx, keyring(t)).GetProviderConfig(ctx, tenant, "email", "sendgrid"); !errors.Is(err, secrets.ErrOpen) {
		t.Fatalf("wrong key: err = %v", err)
	}
	if _, err := s.GetProviderConfig(ctx, tenant, "sms", "twilio"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

func TestProviderConfigsOrderAndDelete(t *testing.T) {
	tx := dbTx(t)
	ctx := context.Background()
	tenant := testenv.UniqueName(t, "t")
	seed(t, tx, tenant)
	s := providers.NewStore(tx, keyring(t))
	for _, c := range []providers.ProviderConfig{
		{TenantID: tenant, Channel: "email", Provider: "backup", Priority: 10, Enabled: true},
		{TenantID: tenant, Channel: "email", Provider: "sendgrid", Priority: 0, Enabled: true, Secret: []byte("k")},
		{TenantID: tenant, Channel: "email", Provider: "disabled", Priority: -1, Enabled: false},
		{TenantID: tenant, Channel: "sms", Provider: "twilio", Enabled: true},
	} {
		if err := s.PutProviderConfig(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := s.ProviderConfigs(ctx, tenant, "email")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Provider != "sendgrid" || cs[1].Provider != "backup" || cs[1].HasSecret || string(cs[0].Secret) != "k" {
		t.Fatalf("configs %v", cs)
	}
	if none, _ := s.ProviderConfigs(ctx, tenant, "push"); len(none) != 0 {
		t.Fatalf("push configs %v", none)
	}
	if ok, err := s.DeleteProviderConfig(ctx, tenant, "email", "backup"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if ok, _ := s.DeleteProviderConfig(ctx, tenant, "email", "backup"); ok {
		t.Fatal("deleted twice")
	}
	if err := s.PutProviderConfig(ctx, providers.ProviderConfig{TenantID: tenant, Channel: "fax", Provider: "x"}); err == nil {
		t.Fatal("unknown channel accepted")
	}
	if err := s.PutProviderConfig(ctx, providers.ProviderConfig{TenantID: tenant, Channel: "sms", Provider: "x", Settings: json.RawMessage(`{`)}); err == nil {
		t.Fatal("invalid settings JSON accepted")
	}
}

func TestPushTokens(t *testing.T) {
	tx := dbTx(t)
	ctx := context.Background()
	tenant, other := testenv.UniqueName(t, "t"), testenv.UniqueName(t, "o")
	seed(t, tx, tenant)
	seed(t, tx, other)
	s := providers.NewStore(tx, nil)

	put := func(tenant, user, token, platform string) providers.PushToken {
		t.Helper()
		pt, err := s.PutPushToken(ctx, providers.PushToken{TenantID: tenant, UserID: user, Token: token, Platform: platform}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return pt
	}
	first := put(tenant, "u1", "tok-a", "ios")
	put(tenant, "u1", "tok-b", "android")
	put(other, "u1", "tok-a", "web") // same token string in another tenant: separate
	again := put(tenant, "u1", "tok-a", "ios")
	if !again.CreatedAt.Equal(first.CreatedAt) || again.LastSeenAt.Before(first.LastSeenAt) {
		t.Fatalf("re-register: %+v then %+v", first, again)
	}
	toks, err := s.PushTokens(ctx, tenant, "u1")
	if err != nil || len(toks) != 2 {
		t.Fatalf("tokens %v %v", toks, err)
	}

	put(tenant, "u2", "tok-b", "android") // the device changed hands
	if toks, _ := s.PushTokens(ctx, tenant, "u1"); len(toks) != 1 || toks[0].Token != "tok-a" {
		t.Fatalf("u1 tokens after move: %v", toks)
	}
	if ok, _ := s.DeletePushToken(ctx, tenant, "u1", "tok-b"); ok {
		t.Fatal("u1 deleted u2's token")
	}
	if ok, err := s.RemoveDeadPushToken(ctx, tenant, "tok-a"); !ok || err != nil {
		t.Fatalf("remove dead: %v %v", ok, err)
	}
	if toks, _ := s.PushTokens(ctx, other, "u1"); len(toks) != 1 {
		t.Fatalf("another tenant's token was touched: %v", toks)
	}
	if ok, _ := s.DeletePushToken(ctx, tenant, "u2", "tok-b"); !ok {
		t.Fatal("delete own token")
	}
	if _, err := s.PutPushToken(ctx, providers.PushToken{TenantID: tenant, UserID: "u1", Token: "x", Platform: "symbian"}, 0); err == nil {
		t.Fatal("unknown platform accepted")
	}
	if _, err := s.PutPushToken(ctx, providers.PushToken{TenantID: tenant, UserID: "nobody", Token: "x", Platform: "ios"}, 0); err == nil {
		t.Fatal("token for a user that does not exist accepted")
	}
}

// A user keeps at most maxPerUser tokens: registering one more removes the
// least recently registered (last_seen_at), and re-registering an old token
// makes it recent again.
func TestPushTokensAreCappedOldestFirst(t *testing.T) {
	tx := dbTx(t)
	ctx := context.Background()
	tenant := testenv.UniqueName(t, "t")
	seed(t, tx, tenant)
	s := providers.NewStore(tx, nil)
	put := func(token string, ageMinutes int) {
		t.Helper()
		if _, err := s.PutPushToken(ctx, providers.PushToken{TenantID: tenant, UserID: "u1", Token: token, Platform: "android"}, 3); err != nil {
			t.Fatal(err)
		}
		// One transaction has one now(): age the token by hand.
		if _, err := tx.Exec(ctx, `UPDATE push_tokens SET last_seen_at = now() - make_interval(mins => $3)
			WHERE tenant_id = $1 AND token = $2`, tenant, token, ageMinutes); err != nil {
			t.Fatal(err)
		}
	}
	tokens := func() []string {
		t.Helper()
		toks, err := s.PushTokens(ctx, tenant, "u1")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tk := range toks {
			out = append(out, tk.Token)
		}
		sort.Strings(out)
		return out
	}
	put("a", 50)
	put("b", 40)
	put("c", 30)
	if got := tokens(); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("under the cap: %v", got)
	}
	put("d", 20) // "a" is the oldest
	if got := tokens(); !reflect.DeepEqual(got, []string{"b", "c", "d"}) {
		t.Fatalf("after d: %v", got)
	}
	put("b", 10) // refreshed: now "c" is the oldest
	put("e", 5)
	if got := tokens(); !reflect.DeepEqual(got, []string{"b", "d", "e"}) {
		t.Fatalf("after refreshing b and adding e: %v", got)
	}
}

func TestReceipts(t *testing.T) {
	tx := dbTx(t)
	ctx := context.Background()
	tenant := testenv.UniqueName(t, "t")
	seed(t, tx, tenant)
	s := providers.NewStore(tx, nil)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	base := providers.Receipt{Provider: "sendgrid", TenantID: tenant, NotificationID: "ntf_1", Channel: "email", ProviderMessageID: "m1"}

	if _, ok, _ := s.LatestReceipt(ctx, tenant, "ntf_1", "email"); ok {
		t.Fatal("receipt before any was recorded")
	}
	rec := func(r providers.Receipt) bool {
		t.Helper()
		ok, err := s.RecordReceipt(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	delivered := base
	delivered.Status, delivered.ProviderStatus, delivered.OccurredAt, delivered.EventID = providers.ReceiptDelivered, "delivered", at.Add(5*time.Second), "ev2"
	processed := base
	processed.Status, processed.ProviderStatus, processed.OccurredAt = providers.ReceiptAccepted, "processed", at

	// Out of order and duplicated.
	if !rec(delivered) || rec(delivered) {
		t.Fatal("duplicate receipt was stored twice")
	}
	if !rec(processed) {
		t.Fatal("processed not stored")
	}
	r, ok, err := s.LatestReceipt(ctx, tenant, "ntf_1", "email")
	if err != nil || !ok || r.Status != providers.ReceiptDelivered || r.EventID != "ev2" || r.ProviderMessageID != "m1" || !r.OccurredAt.Equal(at.Add(5*time.Second)) {
		t.Fatalf("latest = %+v %v %v", r, ok, err)
	}

	unknown := delivered
	unknown.NotificationID = "ntf_nope"
	if rec(unknown) {
		t.Fatal("receipt for an unknown notification was stored")
	}
	untagged := delivered
	untagged.TenantID = ""
	if rec(untagged) {
		t.Fatal("untagged receipt was stored")
	}
	crossTenant := delivered
	crossTenant.TenantID = testenv.UniqueName(t, "x")
	if rec(crossTenant) {
		t.Fatal("receipt naming another tenant's notification was stored")
	}
	if _, ok, _ := s.LatestReceipt(ctx, tenant, "ntf_1", "sms"); ok {
		t.Fatal("email receipt answers for sms")
	}
}
