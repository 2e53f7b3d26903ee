package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/resolver"
	"github.com/herald-notify/herald/providers/twilio"
)

// TestBouncedAddressIsNeverEmailedAgainUntilRemoved: a signed SendGrid hard
// bounce puts the address on the tenant's list; the next email to it (the
// user's address in another case) is suppressed address_suppressed before any
// provider call while the in-app channel still delivers; a soft bounce lists
// nothing; the tenant sees the entry, removes it (audited) and the next email
// goes out. The manual routes validate, page and answer idempotently.
func TestBouncedAddressIsNeverEmailedAgainUntilRemoved(t *testing.T) {
	fake := providertest.NewSendGrid()
	defer fake.Close()
	fake.APIKey = sgAPIKey
	h := apitest.Start(t, apitest.Options{Process: resolver.Process{SendGridBaseURL: fake.URL}})
	tenantID, key := h.TenantWith("hygiene", "receipt")
	_, otherKey := h.Tenant("hygiene-other")
	signKey := providertest.NewSendGridWebhookKey(t)
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/providers/email", key, map[string]any{
		"provider": "sendgrid", "settings": map[string]any{"from": "noreply@acme.example", "webhook_public_key": signKey.PublicKey},
		"credentials": map[string]any{"api_key": sgAPIKey}})
	h.PutUser(key, "ada", map[string]any{"email": "Ada.Lovelace@Example.com"})
	send := func(idem string) string {
		return h.Accept(key, map[string]any{"user_id": "ada", "template_id": "receipt", "channels": []string{"email", "in_app"},
			"idempotency_key": idem, "data": map[string]any{"title": "Receipt", "body": "Thanks"}})
	}

	first := send("s1")
	msgID, _ := h.AwaitChannel(key, first, "email", "sent", "", 30*time.Second)["provider_message_id"].(string)
	if fake.Accepted() != 1 {
		t.Fatalf("SendGrid accepted %d, want 1", fake.Accepted())
	}

	now := time.Now()
	bounce := sgEv(tenantID, first, msgID, "bounce", "ev-b1", now.Unix())
	bounce["email"], bounce["type"], bounce["reason"] = "ada.lovelace@example.com", "bounce", "550 5.1.1 no such user"
	soft := sgEv(tenantID, first, msgID, "bounce", "ev-b2", now.Unix())
	soft["email"], soft["type"] = "soft@example.com", "blocked"
	batch := sgBatch(t, bounce, soft)
	r := h.MustDo(http.StatusOK, http.MethodPost, "/v1/webhooks/sendgrid", "", batch, signSendGrid(t, signKey, now, batch)...)
	if num(r.JSON, "suppressed") != 1 {
		t.Fatalf("bounce batch: %s", r.Body)
	}
	// The provider's retry of the same batch lists nothing more.
	if r := h.MustDo(http.StatusOK, http.MethodPost, "/v1/webhooks/sendgrid", "", batch, signSendGrid(t, signKey, now, batch)...); num(r.JSON, "suppressed") != 0 {
		t.Fatalf("repeated batch: %s", r.Body)
	}

	// The next two emails are suppressed before anything is rendered or sent.
	for _, idem := range []string{"s2", "s3"} {
		id := send(idem)
		h.AwaitChannel(key, id, "email", "suppressed", herald.ReasonAddressSuppressed, 30*time.Second)
		h.AwaitChannel(key, id, "in_app", "delivered", "", 10*time.Second)
	}
	if fake.Accepted() != 1 {
		t.Fatalf("SendGrid accepted %d after the bounce, want still 1", fake.Accepted())
	}

	// The tenant sees the entry (by any case of the address); another tenant does not.
	e := h.MustDo(http.StatusOK, http.MethodGet, "/v1/suppressions/ADA.LOVELACE@example.com", key, nil)
	if e.Str("address") != "ada.lovelace@example.com" || e.Str("reason") != "bounce" || e.Str("source") != "sendgrid" ||
		e.Str("channel") != "email" || !strings.Contains(e.Str("detail"), "no such user") {
		t.Fatalf("entry: %s", e.Body)
	}
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/suppressions/soft@example.com", key, nil)
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/suppressions/ada.lovelace@example.com", otherKey, nil)
	h.MustDo(http.StatusNotFound, http.MethodDelete, "/v1/suppressions/ada.lovelace@example.com", otherKey, nil)

	// Removed: audited by the address's hash, and the next email goes out.
	h.MustDo(http.StatusNoContent, http.MethodDelete, "/v1/suppressions/ada.lovelace@example.com", key, nil)
	h.MustDo(http.StatusNotFound, http.MethodDelete, "/v1/suppressions/ada.lovelace@example.com", key, nil)
	audit := h.MustDo(http.StatusOK, http.MethodGet, "/v1/audit-log?action=suppression.delete", key, nil)
	items, _ := audit.JSON["items"].([]any)
	if len(items) != 1 || strings.Contains(string(audit.Body), "lovelace") {
		t.Fatalf("audit: %s", audit.Body)
	}
	last := send("s4")
	h.AwaitChannel(key, last, "email", "sent", "", 30*time.Second)
	if fake.Accepted() != 2 {
		t.Fatalf("SendGrid accepted %d after the removal, want 2", fake.Accepted())
	}

	// The manual routes.
	for _, bad := range []string{"not-an-address", "12345", "ada@", "+0123"} {
		apitest.WantError(t, h.Do(http.MethodPut, "/v1/suppressions/"+url.PathEscape(bad), key, nil), http.StatusBadRequest, "invalid_field", "address")
	}
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/suppressions/x@example.com", key, map[string]any{"detail": strings.Repeat("x", 501)}),
		http.StatusBadRequest, "invalid_field", "detail")
	put := h.MustDo(http.StatusCreated, http.MethodPut, "/v1/suppressions/X@example.com", key, map[string]any{"detail": "asked by phone"})
	if put.Str("reason") != "manual" || put.Str("source") != "api" || put.Str("detail") != "asked by phone" {
		t.Fatalf("put: %s", put.Body)
	}
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/suppressions/x@example.com", key, nil)
	for i := range 4 {
		h.MustDo(http.StatusCreated, http.MethodPut, fmt.Sprintf("/v1/suppressions/+1415555010%d", i), key, nil)
	}
	seen := map[string]bool{}
	path := "/v1/suppressions?limit=2"
	for pages := 0; path != ""; pages++ {
		page := h.MustDo(http.StatusOK, http.MethodGet, path, key, nil)
		for _, it := range page.JSON["items"].([]any) {
			a := it.(map[string]any)["address"].(string)
			if seen[a] {
				t.Fatalf("%s listed twice", a)
			}
			seen[a] = true
		}
		path = ""
		if next, ok := page.JSON["next_cursor"].(string); ok {
			path = "/v1/suppressions?limit=2&cursor=" + url.QueryEscape(next)
		}
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if len(seen) != 5 || !seen["x@example.com"] || !seen["+14155550103"] {
		t.Fatalf("listed %v", seen)
	}
	sms := h.MustDo(http.StatusOK, http.MethodGet, "/v1/suppressions?channel=sms", key, nil)
	if n := len(sms.JSON["items"].([]any)); n != 4 {
		t.Fatalf("sms entries: %s", sms.Body)
	}
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/suppressions?channel=push", key, nil), http.StatusBadRequest, "invalid_field", "channel")
}

// TestTwilioStopThenStart: an inbound STOP (signed like Twilio signs, over the
// public URL) lists the sender's number and its SMS are suppressed; a forged one
// changes nothing; START lifts it and SMS go out again; START does not lift the
// tenant's own entry.
func TestTwilioStopThenStart(t *testing.T) {
	fake := providertest.NewTwilio()
	defer fake.Close()
	const public = "https://herald.example.com:8443"
	h := apitest.Start(t, apitest.Options{Process: resolver.Process{TwilioBaseURL: fake.URL, PublicBaseURL: public}})
	tenantID, key := h.TenantWith("stopper", "otp")
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/providers/sms", key, map[string]any{
		"provider": "twilio", "settings": map[string]any{"account_sid": twAccountSID, "from": "+15005550006"},
		"credentials": map[string]any{"auth_token": twAuthToken}})
	h.PutUser(key, "bob", map[string]any{"phone": "+14155550101"})
	n := 0
	sendSMS := func() string {
		n++
		return h.Accept(key, map[string]any{"user_id": "bob", "template_id": "otp", "channels": []string{"sms"},
			"idempotency_key": fmt.Sprintf("sms-%d", n), "data": map[string]any{"body": "hello"}})
	}
	path := "/v1/webhooks/twilio/inbound?" + url.Values{twilio.QueryTenant: {tenantID}}.Encode()
	inbound := func(body, token string) apitest.Response {
		t.Helper()
		form := url.Values{"MessageSid": {"SM0123456789abcdef0123456789abcdef"}, "AccountSid": {twAccountSID},
			"From": {"+14155550101"}, "To": {"+15005550006"}, "Body": {body}, "NumMedia": {"0"}}
		return h.Do(http.MethodPost, path, "", form.Encode(), "Content-Type", "application/x-www-form-urlencoded",
			twilio.SignatureHeader, providertest.TwilioSignature(token, public+path, form))
	}

	if r := inbound("STOP", "not-the-token"); r.Status != http.StatusUnauthorized {
		t.Fatalf("forged STOP: %d %s", r.Status, r.Body)
	}
	h.AwaitChannel(key, sendSMS(), "sms", "sent", "", 30*time.Second)

	r := inbound(" Stop ", twAuthToken)
	if r.Status != http.StatusOK || !strings.Contains(r.Header.Get("Content-Type"), "text/xml") || !strings.Contains(string(r.Body), "<Response>") {
		t.Fatalf("STOP: %d %q %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	if e := h.MustDo(http.StatusOK, http.MethodGet, "/v1/suppressions/"+url.PathEscape("+14155550101"), key, nil); e.Str("reason") != "stop" || e.Str("source") != "twilio" {
		t.Fatalf("entry: %s", e.Body)
	}
	h.AwaitChannel(key, sendSMS(), "sms", "suppressed", herald.ReasonAddressSuppressed, 30*time.Second)
	if got := len(fake.AcceptedRequests()); got != 1 {
		t.Fatalf("Twilio accepted %d messages, want 1 (none after STOP)", got)
	}
	// Anything else is acknowledged and changes nothing.
	inbound("thanks!", twAuthToken)
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/suppressions/"+url.PathEscape("+14155550101"), key, nil)

	inbound("start", twAuthToken)
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/suppressions/"+url.PathEscape("+14155550101"), key, nil)
	h.AwaitChannel(key, sendSMS(), "sms", "sent", "", 30*time.Second)
	if got := len(fake.AcceptedRequests()); got != 2 {
		t.Fatalf("Twilio accepted %d messages, want 2", got)
	}

	// The tenant's own entry is the tenant's: a START does not lift it.
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/suppressions/"+url.PathEscape("+14155550101"), key, nil)
	inbound("START", twAuthToken)
	if e := h.MustDo(http.StatusOK, http.MethodGet, "/v1/suppressions/"+url.PathEscape("+14155550101"), key, nil); e.Str("reason") != "manual" {
		t.Fatalf("entry after START: %s", e.Body)
	}
}

// TestCampaignSkipsSuppressedRecipients: a campaign's batch reads the list once
// and suppresses exactly the listed addresses (email of one recipient, phone of
// another), counted by reason; everyone else is sent to.
func TestCampaignSkipsSuppressedRecipients(t *testing.T) {
	h := apitest.Start(t, apitest.Options{CampaignPageSize: 10, CampaignWindow: 2})
	tenantID, key := h.TenantWith("hygiene-campaign", "promo")
	users := make([]store.User, 30)
	ids := make([]string, len(users))
	for i := range users {
		id := fmt.Sprintf("c%02d", i)
		email, phone := id+"@Example.com", fmt.Sprintf("+1415555%04d", i)
		users[i], ids[i] = store.User{UserID: id, Email: &email, Phone: &phone}, id
	}
	if err := h.Store.InsertUsers(t.Context(), tenantID, users); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"c03@example.com", "c17@example.com", "c29@example.com", "+14155550017", "+14155550021"} {
		h.MustDo(http.StatusCreated, http.MethodPut, "/v1/suppressions/"+url.PathEscape(a), key, nil)
	}
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "hygiene", "template_id": "promo",
		"channels": []string{"email", "sms"}, "data": map[string]any{"title": "Sale", "body": "20% off"}, "audience": map[string]any{"user_ids": ids}})
	done := awaitCampaign(h, key, "hygiene", herald.CampaignCompleted, 60*time.Second)
	email, sms := counts(t, done, "email"), counts(t, done, "sms")
	if num(email, "sent") != 27 || num(email["suppressed"].(map[string]any), string(herald.ReasonAddressSuppressed)) != 3 ||
		num(sms, "sent") != 28 || num(sms["suppressed"].(map[string]any), string(herald.ReasonAddressSuppressed)) != 2 {
		t.Fatalf("counts: %s", done.Body)
	}
	sent := sandboxPerNotification(t, tenantID)
	if len(sent) != 27 {
		t.Fatalf("%d recipients were emailed, want 27", len(sent))
	}
}
