package api_test

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/sendgrid"
	"github.com/herald-notify/herald/providers/twilio"
)

// maxForgedAlloc bounds what the whole process (API, test client, OpenAPI
// check) may allocate answering one forged webhook request. Before the
// hardening: ~867 MB (an untagged 2 MiB SendGrid batch, decoded unverified),
// ~83 MB (a tagged one), ~488 MB (a 64 KiB Twilio body, whose signature
// twilio-go computes by quadratic concatenation).
const maxForgedAlloc = 8 << 20

// Forged and unsigned webhook requests are answered without decoding anything
// unverified, at a bounded cost, with the answers the API always gave. Not
// parallel: allocations are measured for the whole process.
func TestForgedWebhooksAreCheap(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	tenantID, key := h.Tenant("forged")
	pub := providertest.NewSendGridWebhookKey(t).PublicKey
	forger := providertest.NewSendGridWebhookKey(t)
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/providers/email", key, map[string]any{"provider": "sendgrid",
		"settings": map[string]any{"from": "noreply@acme.example", "webhook_public_key": pub}, "credentials": map[string]any{"api_key": sgAPIKey}})
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/providers/sms", key, map[string]any{"provider": "twilio",
		"settings": map[string]any{"account_sid": twAccountSID, "from": "+14155550100"}, "credentials": map[string]any{"auth_token": twAuthToken}})

	batch := func(event string) []byte {
		n := (sendgrid.MaxWebhookBodyBytes - 2) / (len(event) + 1)
		return []byte("[" + strings.TrimSuffix(strings.Repeat(event+",", n), ",") + "]")
	}
	untagged := batch(`{"event":"delivered"}`)
	tagged := batch(`{"event":"delivered","tenant":"` + tenantID + `"}`)
	forged := signSendGrid(t, forger, time.Now(), tagged)
	var form strings.Builder
	for i := 0; form.Len() < twilio.MaxWebhookBodyBytes-16; i++ {
		form.WriteString("p" + strconv.Itoa(i) + "=&")
	}
	twPath := "/v1/webhooks/twilio?tenant=" + tenantID + "&notification_id=n_x&channel=sms"
	badTwilio := []string{"Content-Type", "application/x-www-form-urlencoded", twilio.SignatureHeader, base64.StdEncoding.EncodeToString([]byte("forged"))}

	tests := []struct {
		name     string
		path     string
		body     []byte
		headers  []string
		status   int
		code     string
		received float64 // for a 200
	}{
		{"untagged 2 MiB batch, unsigned: ignored unverified, counted by a scan", "/v1/webhooks/sendgrid", untagged, nil,
			http.StatusOK, "", float64(strings.Count(string(untagged), "delivered"))},
		{"tagged 2 MiB batch, forged signature", "/v1/webhooks/sendgrid", tagged, forged, http.StatusUnauthorized, "invalid_signature", 0},
		{"tagged 2 MiB batch, unsigned", "/v1/webhooks/sendgrid", tagged, nil, http.StatusUnauthorized, "invalid_signature", 0},
		{"?tenant= 2 MiB batch, unsigned (not read)", "/v1/webhooks/sendgrid?tenant=" + tenantID, tagged, nil, http.StatusUnauthorized, "invalid_signature", 0},
		{"Twilio 16 KiB of parameters, forged signature", twPath, []byte(form.String()), badTwilio, http.StatusUnauthorized, "invalid_signature", 0},
		{"Twilio 64 KiB, forged signature (too large)", twPath, []byte(strings.Repeat("a", 64<<10)), badTwilio, http.StatusRequestEntityTooLarge, "body_too_large", 0},
		{"Twilio, unsigned (not read)", twPath, []byte(form.String()), []string{"Content-Type", "application/x-www-form-urlencoded"}, http.StatusUnauthorized, "invalid_signature", 0},
	}
	for _, tc := range tests {
		var r apitest.Response
		got := allocatedBy(func() { r = h.Do(http.MethodPost, tc.path, "", tc.body, tc.headers...) })
		t.Logf("%s: %d, %d KiB allocated", tc.name, r.Status, got>>10)
		if _, code := r.ErrorField(); r.Status != tc.status || code != tc.code {
			t.Errorf("%s: %d %s, want %d %s: %.300s", tc.name, r.Status, code, tc.status, tc.code, r.Body)
		}
		if tc.status == http.StatusOK && (r.JSON["received"] != tc.received || r.JSON["ignored"] != tc.received) {
			t.Errorf("%s: %s, want %v received and ignored", tc.name, r.Body, tc.received)
		}
		if got > maxForgedAlloc {
			t.Errorf("%s: %d MiB allocated, want < %d MiB", tc.name, got>>20, maxForgedAlloc>>20)
		}
	}
}

// The endpoints without an API key are rate limited per source address: a
// 429 rate_limited with Retry-After in the API's error shape (checked against
// the OpenAPI document by the harness), before the body is read. A body counts
// one request per 64 KiB, so 2 MiB batches exhaust the default burst (200) on
// the seventh; the small unsubscribe requests have a bucket of their own.
func TestUnauthenticatedEndpointsAreRateLimited(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	body := []byte("[" + strings.Repeat(`{},`, (sendgrid.MaxWebhookBodyBytes-3)/3) + "{}]")
	var r apitest.Response
	for i := 0; i < 20; i++ {
		r = h.Do(http.MethodPost, "/v1/webhooks/sendgrid?tenant=t_unknown", "", body)
		if r.Status == http.StatusTooManyRequests {
			break
		}
		if r.Status != http.StatusUnauthorized {
			t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
		}
	}
	apitest.WantError(t, r, http.StatusTooManyRequests, "rate_limited", "")
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("Retry-After = %q, want whole seconds ≥ 1", r.Header.Get("Retry-After"))
	}
	// The unsubscribe links have their own bucket: still answered.
	if r := h.Do(http.MethodPost, "/v1/unsubscribe?token=x", "", "List-Unsubscribe=One-Click", "Content-Type", "application/x-www-form-urlencoded"); r.Status != http.StatusBadRequest {
		t.Fatalf("unsubscribe: %d %s", r.Status, r.Body)
	}
	var i int
	for i = 0; i < 1000; i++ {
		if r = h.Do(http.MethodGet, "/v1/unsubscribe?token=x", "", nil); r.Status == http.StatusTooManyRequests {
			break
		}
	}
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("unsubscribe after %d requests: %d %s", i, r.Status, r.Body)
	}
}
