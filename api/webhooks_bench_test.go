package api_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/secrets"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/internal/unsubscribe"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/sendgrid"
	"github.com/herald-notify/herald/providers/twilio"
)

// forgeryPublicBase is the public base URL of the forgery server (Twilio signs it).
const forgeryPublicBase = "https://herald.example.test"

// forgeryEnv is an API handler (no network, no Temporal: the webhooks need
// neither) whose tenant has a SendGrid webhook key and Twilio credentials, for
// measuring what forged webhook requests cost.
type forgeryEnv struct {
	handler  http.Handler
	tenantID string
	signKey  providertest.SendGridWebhookKey // the tenant's SendGrid webhook key
}

func startForgeryEnv(tb testing.TB, limits api.PublicLimits) forgeryEnv {
	tb.Helper()
	ctx := context.Background()
	pool := testenv.Pool(tb)
	st := store.New(pool)
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		tb.Fatal(err)
	}
	keys, err := secrets.New(raw)
	if err != nil {
		tb.Fatal(err)
	}
	ps := providers.NewStore(pool, keys)
	tn, _, err := st.CreateTenant(ctx, testenv.UniqueName(tb, "forge"))
	if err != nil {
		tb.Fatal(err)
	}
	k := providertest.NewSendGridWebhookKey(tb)
	settings, _ := json.Marshal(map[string]any{"from": "shop@example.com", "webhook_public_key": k.PublicKey})
	for _, pc := range []providers.ProviderConfig{
		{TenantID: tn.ID, Channel: "email", Provider: "sendgrid", Enabled: true, Settings: settings, Secret: []byte(`{"api_key":"SG.x"}`)},
		{TenantID: tn.ID, Channel: "sms", Provider: "twilio", Enabled: true, Settings: json.RawMessage(`{"account_sid":"AC00000000000000000000000000000000","from":"+14155550100"}`),
			Secret: []byte(`{"auth_token":"tw-secret"}`)},
	} {
		if err := ps.PutProviderConfig(ctx, pc); err != nil {
			tb.Fatal(err)
		}
	}
	srv := api.New(st, nil, api.Config{Providers: api.ProviderConfig{Store: ps, WebhookTolerance: 5 * time.Minute},
		PublicBaseURL: forgeryPublicBase, Unsubscribe: unsubscribe.NewSigner(raw), Limits: api.LimitConfig{Public: limits}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	return forgeryEnv{handler: srv.Handler(), tenantID: tn.ID, signKey: k}
}

// forgery is one forged (or unsigned) webhook request.
type forgery struct {
	name    string
	path    string // with the query
	body    []byte
	headers []string
	ctype   string
	want    int // the status it gets
}

// sgBody is a JSON array of copies of event, at most size bytes.
func sgBody(event string, size int) []byte {
	n := (size - 2) / (len(event) + 1)
	return []byte("[" + strings.TrimSuffix(strings.Repeat(event+",", n), ",") + "]")
}

// twBody is a form of distinct empty parameters, at most size bytes.
func twBody(size int) []byte {
	var b strings.Builder
	for i := 0; ; i++ {
		p := fmt.Sprintf("p%d=&", i)
		if b.Len()+len(p) > size {
			break
		}
		b.WriteString(p)
	}
	return []byte(strings.TrimSuffix(b.String(), "&"))
}

func (e forgeryEnv) forgeries() []forgery {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	badSig := []string{sendgrid.SignatureHeader, base64.StdEncoding.EncodeToString(make([]byte, 70)), sendgrid.TimestampHeader, ts}
	const limit = sendgrid.MaxWebhookBodyBytes
	twPath := "/v1/webhooks/twilio?tenant=" + e.tenantID + "&notification_id=n_x&channel=sms"
	return []forgery{
		{"sendgrid/untagged-2MiB", "/v1/webhooks/sendgrid", sgBody(`{}`, limit), nil, "application/json", http.StatusOK},
		{"sendgrid/tagged-2MiB-bad-signature", "/v1/webhooks/sendgrid", sgBody(`{"event":"delivered","tenant":"`+e.tenantID+`"}`, limit), badSig, "application/json", http.StatusUnauthorized},
		{"sendgrid/tagged-2MiB-unsigned", "/v1/webhooks/sendgrid", sgBody(`{"event":"delivered","tenant":"`+e.tenantID+`"}`, limit), nil, "application/json", http.StatusUnauthorized},
		{"sendgrid/query-tenant-2MiB-bad-signature", "/v1/webhooks/sendgrid?tenant=" + e.tenantID, sgBody(`{}`, limit), badSig, "application/json", http.StatusUnauthorized},
		{"sendgrid/query-tenant-2MiB-unsigned", "/v1/webhooks/sendgrid?tenant=" + e.tenantID, sgBody(`{}`, limit), nil, "application/json", http.StatusUnauthorized},
		{"twilio/16KiB-bad-signature", twPath, twBody(twilio.MaxWebhookBodyBytes), []string{twilio.SignatureHeader, "bm90IGEgc2lnbmF0dXJl"}, "application/x-www-form-urlencoded", http.StatusUnauthorized},
		{"twilio/16KiB-unsigned", twPath, twBody(twilio.MaxWebhookBodyBytes), nil, "application/x-www-form-urlencoded", http.StatusUnauthorized},
		{"unsubscribe/bad-token", "/v1/unsubscribe?token=" + strings.Repeat("x", 200), []byte("List-Unsubscribe=One-Click"), nil, "application/x-www-form-urlencoded", http.StatusBadRequest},
	}
}

func (e forgeryEnv) serve(f forgery) int {
	req := httptest.NewRequest(http.MethodPost, f.path, bytes.NewReader(f.body))
	req.Header.Set("Content-Type", f.ctype)
	req.RemoteAddr = "192.0.2.1:1234"
	for i := 0; i+1 < len(f.headers); i += 2 {
		req.Header.Set(f.headers[i], f.headers[i+1])
	}
	w := httptest.NewRecorder()
	e.handler.ServeHTTP(w, req)
	return w.Code
}

// noPublicLimits turns the per-IP and per-tenant buckets off, so a benchmark
// from one address measures the handlers rather than the 429.
var noPublicLimits = api.PublicLimits{PerIP: api.Rate{PerSecond: -1}, PerTenant: api.Rate{PerSecond: -1}}

// BenchmarkForgedWebhook measures the bytes one forged or unsigned request to an
// unauthenticated endpoint allocates (B/op), from the handler's entry to its
// answer, against the test PostgreSQL (rate limits off; rate-limited is the cost
// of a 429 from the per-IP bucket):
//
//	go test -run '^$' -bench BenchmarkForgedWebhook -benchtime 20x ./api/
func BenchmarkForgedWebhook(b *testing.B) {
	env := startForgeryEnv(b, noPublicLimits)
	for _, f := range env.forgeries() {
		b.Run(f.name, func(b *testing.B) {
			if got := env.serve(f); got != f.want {
				b.Fatalf("status %d, want %d", got, f.want)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(f.body)))
			for b.Loop() {
				env.serve(f)
			}
		})
	}
	b.Run("rate-limited", func(b *testing.B) {
		limited := startForgeryEnv(b, api.PublicLimits{PerIP: api.Rate{PerSecond: 1e-9, Burst: 1}})
		f := limited.forgeries()[1] // a 2 MiB forged batch
		limited.serve(f)            // takes the only token
		if got := limited.serve(f); got != http.StatusTooManyRequests {
			b.Fatalf("status %d, want 429", got)
		}
		b.ReportAllocs()
		for b.Loop() {
			limited.serve(f)
		}
	})
}
