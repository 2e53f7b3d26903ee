package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/resolver"
	"github.com/herald-notify/herald/providers/sendgrid"
	"github.com/herald-notify/herald/providers/twilio"
)

// signSendGrid does what SendGrid does: ECDSA P-256 over SHA-256(timestamp || body),
// ASN.1 DER, base64; returns the two headers as Do's header pairs.
func signSendGrid(t *testing.T, k providertest.SendGridWebhookKey, ts time.Time, body []byte) []string {
	t.Helper()
	sig, stamp := k.Sign(t, ts, body)
	return []string{sendgrid.SignatureHeader, sig, sendgrid.TimestampHeader, stamp}
}

type sgEvent map[string]any

func sgBatch(t *testing.T, events ...sgEvent) []byte {
	t.Helper()
	raw, err := json.Marshal(events)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func sgEv(tenant, notificationID, msgID, event, eventID string, ts int64) sgEvent {
	return sgEvent{"email": "ada@example.com", "timestamp": ts, "event": event, "sg_event_id": eventID,
		"sg_message_id": msgID + ".filterdrecv-5645d9c87f-abcde-1-64B0C5A1-3.0",
		"tenant":        tenant, "notification_id": notificationID, "channel": "email"}
}

func deliveriesOf(t *testing.T, h *apitest.Harness, key, id string) (overall string, email map[string]any) {
	t.Helper()
	r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+id, key, nil)
	return r.Str("status"), channelOf(t, r, "email")
}

func TestSendGridWebhook(t *testing.T) {
	fake := providertest.NewSendGrid()
	defer fake.Close()
	fake.APIKey = sgAPIKey
	h := apitest.Start(t, apitest.Options{Process: resolver.Process{SendGridBaseURL: fake.URL}})
	tenantID, key := h.TenantWith("mailer", "otp", "receipt")
	otherID, _ := h.Tenant("other")
	signKey := providertest.NewSendGridWebhookKey(t)
	forger := providertest.NewSendGridWebhookKey(t)
	if r := h.Do(http.MethodPut, "/v1/providers/email", key, map[string]any{
		"provider": "sendgrid", "settings": map[string]any{"from": "noreply@acme.example", "webhook_public_key": signKey.PublicKey},
		"credentials": map[string]any{"api_key": sgAPIKey},
	}); r.Status != http.StatusCreated {
		t.Fatalf("configure sendgrid: %d %s", r.Status, r.Body)
	}
	createUser(h, key, "ada")

	// Two notifications go out through the SendGrid fake.
	var ids, msgIDs []string
	for _, k := range []string{"n1", "n2"} {
		ids = append(ids, h.Accept(key, map[string]any{"user_id": "ada", "template_id": "receipt", "channels": []string{"email"},
			"idempotency_key": k, "data": map[string]any{"title": "Receipt " + k, "body": "Thanks"}}))
	}
	for _, id := range ids {
		got := h.AwaitStatus(key, id, "sent", 30*time.Second)
		c := channelOf(t, got, "email")
		if c["provider"] != "sendgrid" || c["provider_message_id"] == nil {
			t.Fatalf("email channel: %s", got.Body)
		}
		msgIDs = append(msgIDs, c["provider_message_id"].(string))
	}
	if n := fake.Accepted(); n != 2 {
		t.Fatalf("SendGrid fake accepted %d messages, want 2", n)
	}
	n1, n2 := ids[0], ids[1]
	ctx := context.Background()
	unchanged := func(stage string) {
		t.Helper()
		for _, id := range ids {
			overall, email := deliveriesOf(t, h, key, id)
			if overall != "sent" || email["status"] != "sent" {
				t.Fatalf("%s: %s changed: %s %v", stage, id, overall, email)
			}
			if _, ok, err := h.Providers.LatestReceipt(ctx, tenantID, id, "email"); err != nil || ok {
				t.Fatalf("%s: a receipt was recorded for %s (%v)", stage, id, err)
			}
		}
	}

	now := time.Now()
	batch := sgBatch(t,
		sgEv(tenantID, n1, msgIDs[0], "delivered", "ev-d1", now.Unix()),
		sgEv(tenantID, n1, msgIDs[0], "delivered", "ev-d1", now.Unix()),   // duplicate
		sgEv(tenantID, n1, msgIDs[0], "processed", "ev-p1", now.Unix()-5), // out of order: arrives after delivered
		func() sgEvent {
			e := sgEv(tenantID, n2, msgIDs[1], "bounce", "ev-b2", now.Unix())
			e["type"], e["status"], e["reason"] = "bounce", "5.1.1", "550 5.1.1 The email account that you tried to reach does not exist"
			return e
		}(),
		sgEv(tenantID, "n_"+strings.Repeat("ab", 32), "unknownmsg", "delivered", "ev-u", now.Unix()), // unknown message
		sgEvent{"email": "x@example.com", "timestamp": now.Unix(), "event": "spamreport", "sg_event_id": "ev-s"},
	)

	// Forged: signed with another key. 401, nothing changes.
	r := h.Do(http.MethodPost, "/v1/webhooks/sendgrid", "", batch, signSendGrid(t, forger, now, batch)...)
	if _, code := r.ErrorField(); r.Status != http.StatusUnauthorized || code != "invalid_signature" {
		t.Fatalf("forged: %d %s", r.Status, r.Body)
	}
	// Signed, but the body was altered afterwards.
	altered := []byte(strings.Replace(string(batch), "bounce", "delivered", 1))
	h.MustDo(http.StatusUnauthorized, http.MethodPost, "/v1/webhooks/sendgrid", "", altered, signSendGrid(t, signKey, now, batch)...)
	// Stale: a correct signature over a timestamp outside the tolerance (5 min).
	stale := now.Add(-10 * time.Minute)
	h.MustDo(http.StatusUnauthorized, http.MethodPost, "/v1/webhooks/sendgrid", "", batch, signSendGrid(t, signKey, stale, batch)...)
	// Unsigned.
	h.MustDo(http.StatusUnauthorized, http.MethodPost, "/v1/webhooks/sendgrid", "", batch)
	// Signed with the right key but addressed (?tenant=) to a tenant without a key.
	h.MustDo(http.StatusUnauthorized, http.MethodPost, "/v1/webhooks/sendgrid?tenant="+otherID, "", batch, signSendGrid(t, signKey, now, batch)...)
	unchanged("after rejected requests")

	// The real batch.
	r = h.MustDo(http.StatusOK, http.MethodPost, "/v1/webhooks/sendgrid", "", batch, signSendGrid(t, signKey, now, batch)...)
	if r.JSON["received"] != 5.0 || r.JSON["recorded"] != 3.0 || r.JSON["applied"] != 3.0 || r.JSON["ignored"] != 1.0 {
		t.Fatalf("result: %s", r.Body)
	}
	check := func(stage string) {
		t.Helper()
		overall, email := deliveriesOf(t, h, key, n1)
		if overall != "delivered" || email["status"] != "delivered" || email["delivered_at"] == nil || email["provider_message_id"] != msgIDs[0] {
			t.Fatalf("%s: n1 %s %v", stage, overall, email)
		}
		overall, email = deliveriesOf(t, h, key, n2)
		reason, _ := email["reason"].(string)
		if overall != "failed" || email["status"] != "failed" || !strings.Contains(reason, "does not exist") {
			t.Fatalf("%s: n2 %s %v", stage, overall, email)
		}
	}
	check("after the batch")
	if rc, ok, err := h.Providers.LatestReceipt(ctx, tenantID, n1, "email"); err != nil || !ok || rc.ProviderStatus != "delivered" || rc.ProviderMessageID != msgIDs[0] {
		t.Fatalf("n1's receipt: %+v %v %v", rc, ok, err)
	}

	// SendGrid retries the whole batch: duplicates collapse, nothing moves.
	r = h.Do(http.MethodPost, "/v1/webhooks/sendgrid", "", batch, signSendGrid(t, signKey, time.Now(), batch)...)
	if r.Status != http.StatusOK || r.JSON["recorded"] != 0.0 {
		t.Fatalf("retry: %d %s", r.Status, r.Body)
	}
	// A late processed for n1 in a batch of its own, addressed with ?tenant=: stays delivered.
	late := sgBatch(t, sgEv(tenantID, n1, msgIDs[0], "processed", "ev-p1-late", now.Unix()-60))
	if r := h.Do(http.MethodPost, "/v1/webhooks/sendgrid?tenant="+tenantID, "", late, signSendGrid(t, signKey, time.Now(), late)...); r.Status != http.StatusOK || r.JSON["applied"] != 0.0 {
		t.Fatalf("late processed: %d %s", r.Status, r.Body)
	}
	check("after the retry and the late event")

	// With ?tenant=, events naming another tenant are ignored (one tenant cannot
	// forge receipts for another's notifications with its own key).
	cross := sgBatch(t, sgEv(otherID, n2, msgIDs[1], "delivered", "ev-x", now.Unix()))
	if r := h.Do(http.MethodPost, "/v1/webhooks/sendgrid?tenant="+tenantID, "", cross, signSendGrid(t, signKey, time.Now(), cross)...); r.Status != http.StatusOK || r.JSON["ignored"] != 1.0 || r.JSON["applied"] != 0.0 {
		t.Fatalf("cross-tenant event: %d %s", r.Status, r.Body)
	}
	// Without ?tenant=, events naming two tenants are ambiguous.
	mixed := sgBatch(t, sgEv(tenantID, n1, msgIDs[0], "delivered", "ev-m1", now.Unix()), sgEv(otherID, n2, msgIDs[1], "delivered", "ev-m2", now.Unix()))
	r = h.Do(http.MethodPost, "/v1/webhooks/sendgrid", "", mixed, signSendGrid(t, signKey, time.Now(), mixed)...)
	if field, code := r.ErrorField(); r.Status != http.StatusBadRequest || field != "tenant" || code != "ambiguous_tenant" {
		t.Fatalf("mixed tenants: %d %s", r.Status, r.Body)
	}
	// A batch that names no tenant at all is nothing Herald sent: 200, ignored.
	foreign := sgBatch(t, sgEvent{"email": "x@example.com", "timestamp": now.Unix(), "event": "delivered", "sg_event_id": "ev-f", "sg_message_id": "foreign.filter"})
	if r := h.Do(http.MethodPost, "/v1/webhooks/sendgrid", "", foreign); r.Status != http.StatusOK || r.JSON["ignored"] != 1.0 {
		t.Fatalf("untagged batch: %d %s", r.Status, r.Body)
	}
	h.MustDo(http.StatusBadRequest, http.MethodPost, "/v1/webhooks/sendgrid", "", `{"not":"an array"}`)
	check("at the end")
}

func TestTwilioWebhook(t *testing.T) {
	fake := providertest.NewTwilio()
	defer fake.Close()
	// Twilio reaches Herald through a proxy: another scheme, host and port.
	const public = "https://herald.example.com:8443"
	h := apitest.Start(t, apitest.Options{Process: resolver.Process{TwilioBaseURL: fake.URL, PublicBaseURL: public}})
	tenantID, key := h.TenantWith("texter", "otp", "receipt")
	if r := h.Do(http.MethodPut, "/v1/providers/sms", key, map[string]any{
		"provider": "twilio", "settings": map[string]any{"account_sid": twAccountSID, "from": "+15005550006"},
		"credentials": map[string]any{"auth_token": twAuthToken},
	}); r.Status != http.StatusCreated {
		t.Fatalf("configure twilio: %d %s", r.Status, r.Body)
	}
	h.PutUser(key, "bob", map[string]any{"email": "bob@example.com", "phone": "+14155550101"})
	id := h.Accept(key, map[string]any{"user_id": "bob", "template_id": "otp", "channels": []string{"sms"}, "data": map[string]any{"body": "Code 123456"}})
	got := h.AwaitStatus(key, id, "sent", 30*time.Second)
	sms := channelOf(t, got, "sms")
	sid, _ := sms["provider_message_id"].(string)
	if sms["provider"] != "twilio" || !strings.HasPrefix(sid, "SM") {
		t.Fatalf("sms channel: %s", got.Body)
	}
	accepted := fake.AcceptedRequests()
	if len(accepted) != 1 {
		t.Fatalf("Twilio fake accepted %d messages, want 1", len(accepted))
	}
	// The StatusCallback Herald gave Twilio: the public URL with the tags.
	callback, err := url.Parse(accepted[0].Form.Get("StatusCallback"))
	if err != nil || !strings.HasPrefix(callback.String(), public+resolver.TwilioWebhookPath+"?") ||
		callback.Query().Get(twilio.QueryNotificationID) != id || callback.Query().Get(twilio.QueryTenant) != tenantID {
		t.Fatalf("StatusCallback: %q (%v)", accepted[0].Form.Get("StatusCallback"), err)
	}
	path := callback.RequestURI()
	post := func(form url.Values, signature string) apitest.Response {
		t.Helper()
		return h.Do(http.MethodPost, path, "", form.Encode(), "Content-Type", "application/x-www-form-urlencoded",
			twilio.SignatureHeader, signature)
	}
	status := func(msgStatus string) url.Values {
		return url.Values{"MessageSid": {sid}, "SmsSid": {sid}, "AccountSid": {twAccountSID}, "MessageStatus": {msgStatus},
			"SmsStatus": {msgStatus}, "To": {"+14155550101"}, "From": {"+15005550006"}, "ApiVersion": {"2010-04-01"}}
	}
	smsStatus := func() (string, string) {
		t.Helper()
		g := h.Do(http.MethodGet, "/v1/notifications/"+id, key, nil)
		return g.Str("status"), channelOf(t, g, "sms")["status"].(string)
	}

	delivered := status("delivered")
	for name, sig := range map[string]string{
		"forged (wrong token)":         providertest.TwilioSignature("not-the-token", callback.String(), delivered),
		"signed over the internal URL": providertest.TwilioSignature(twAuthToken, h.URL+path, delivered),
		"signed over other params":     providertest.TwilioSignature(twAuthToken, callback.String(), status("failed")),
		"missing":                      "",
	} {
		r := post(delivered, sig)
		if _, code := r.ErrorField(); r.Status != http.StatusUnauthorized || code != "invalid_signature" {
			t.Fatalf("%s: %d %s", name, r.Status, r.Body)
		}
	}
	if overall, ch := smsStatus(); overall != "sent" || ch != "sent" {
		t.Fatalf("a rejected callback changed the status: %s %s", overall, ch)
	}
	if _, ok, _ := h.Providers.LatestReceipt(context.Background(), tenantID, id, "sms"); ok {
		t.Fatal("a rejected callback recorded a receipt")
	}

	r := post(delivered, providertest.TwilioSignature(twAuthToken, callback.String(), delivered))
	if r.Status != http.StatusOK || r.JSON["applied"] != 1.0 || r.JSON["recorded"] != 1.0 {
		t.Fatalf("delivered: %d %s", r.Status, r.Body)
	}
	if overall, ch := smsStatus(); overall != "delivered" || ch != "delivered" {
		t.Fatalf("after delivered: %s %s", overall, ch)
	}
	// A late "sent" (callbacks arrive out of order) does not move it back.
	sent := status("sent")
	if r := post(sent, providertest.TwilioSignature(twAuthToken, callback.String(), sent)); r.Status != http.StatusOK || r.JSON["applied"] != 0.0 {
		t.Fatalf("late sent: %d %s", r.Status, r.Body)
	}
	if overall, ch := smsStatus(); overall != "delivered" || ch != "delivered" {
		t.Fatalf("after a late sent: %s %s", overall, ch)
	}
	// A status Herald does not track: 200, ignored.
	receiving := status("receiving")
	if r := post(receiving, providertest.TwilioSignature(twAuthToken, callback.String(), receiving)); r.Status != http.StatusOK || r.JSON["ignored"] != 1.0 {
		t.Fatalf("untracked status: %d %s", r.Status, r.Body)
	}
	// A verified callback for a notification the tenant does not have: 200, ignored.
	q := callback.Query()
	q.Set(twilio.QueryNotificationID, "n_"+strings.Repeat("cd", 32))
	unknownURL := public + resolver.TwilioWebhookPath + "?" + q.Encode()
	r = h.Do(http.MethodPost, resolver.TwilioWebhookPath+"?"+q.Encode(), "", delivered.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", twilio.SignatureHeader, providertest.TwilioSignature(twAuthToken, unknownURL, delivered))
	if r.Status != http.StatusOK || r.JSON["ignored"] != 1.0 || r.JSON["recorded"] != 0.0 {
		t.Fatalf("unknown notification: %d %s", r.Status, r.Body)
	}
	// No tenant in the URL: nothing to verify with.
	if r := h.Do(http.MethodPost, resolver.TwilioWebhookPath, "", delivered.Encode(), "Content-Type", "application/x-www-form-urlencoded",
		twilio.SignatureHeader, providertest.TwilioSignature(twAuthToken, public+resolver.TwilioWebhookPath, delivered)); r.Status != http.StatusUnauthorized {
		t.Fatalf("no tenant: %d %s", r.Status, r.Body)
	}
}
