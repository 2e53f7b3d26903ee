package apitest

// The helpers the end-to-end tests of every package share: requests that must
// succeed, users, notifications and their status, the provider fakes and the
// provider configs that point a tenant at them.

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/resolver"
)

// MustDo is Do that fails the test unless the response has status want.
func (h *Harness) MustDo(want int, method, path, key string, body any, headers ...string) Response {
	h.T.Helper()
	r := h.Do(method, path, key, body, headers...)
	if r.Status != want {
		h.T.Fatalf("%s %s: got %d, want %d: %s", method, path, r.Status, want, r.Body)
	}
	return r
}

// WantError fails the test unless r is an error response with this status,
// error.code and error.field ("" for none).
func WantError(t testing.TB, r Response, status int, code, field string) {
	t.Helper()
	gotField, gotCode := r.ErrorField()
	if r.Status != status || gotCode != code || gotField != field {
		t.Fatalf("got %d %s/%s, want %d %s/%s: %s", r.Status, gotCode, gotField, status, code, field, r.Body)
	}
}

// TenantWith creates a tenant (as Tenant does) and stores SimpleTemplate(id) for it
// for each of templateIDs.
func (h *Harness) TenantWith(name string, templateIDs ...string) (id, key string) {
	h.T.Helper()
	id, key = h.Tenant(name)
	for _, tid := range templateIDs {
		h.Template(key, SimpleTemplate(tid))
	}
	return id, key
}

// PutUser creates a user with the given profile (PUT /v1/users/{id}, 201).
func (h *Harness) PutUser(key, userID string, profile map[string]any) {
	h.T.Helper()
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/users/"+userID, key, profile)
}

// Submit sends a notification (POST /v1/notifications) and returns the answer,
// whatever it is.
func (h *Harness) Submit(key string, body any) Response {
	h.T.Helper()
	return h.Do(http.MethodPost, "/v1/notifications", key, body)
}

// Accept submits a notification, fails the test unless it is accepted (202) and
// returns its id.
func (h *Harness) Accept(key string, body map[string]any) string {
	h.T.Helper()
	return h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/notifications", key, body).Str("notification_id")
}

// Channels returns a notification status response's channels by name.
func (r Response) Channels() map[herald.Channel]map[string]any {
	out := map[herald.Channel]map[string]any{}
	list, _ := r.JSON["channels"].([]any)
	for _, c := range list {
		m := c.(map[string]any)
		out[herald.Channel(m["channel"].(string))] = m
	}
	return out
}

// Channels returns a notification's overall status and its channels by name
// (GET /v1/notifications/{id}, which must answer 200). The channels are the
// JSON as decoded: compare their fields with strings.
func (h *Harness) Channels(key, id string) (overall herald.NotificationStatus, channels map[herald.Channel]map[string]any) {
	h.T.Helper()
	r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+id, key, nil)
	return herald.NotificationStatus(r.Str("status")), r.Channels()
}

// AwaitChannel polls a notification until its channel has status (and reason,
// unless reason is "") and returns the channel; it fails the test after within.
func (h *Harness) AwaitChannel(key, id string, channel herald.Channel, status herald.DeliveryStatus, reason herald.Reason, within time.Duration) map[string]any {
	h.T.Helper()
	deadline := time.Now().Add(within)
	for {
		_, chans := h.Channels(key, id)
		got := chans[channel]
		// got holds the decoded JSON: strings, not typed words.
		if got != nil && got["status"] == string(status) && (reason == "" || got["reason"] == string(reason)) {
			return got
		}
		if time.Now().After(deadline) {
			h.T.Fatalf("%s: timed out after %s waiting for %s to be %s %s; last state %v", id, within, channel, status, reason, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// AwaitStatus polls a notification until its overall status is status and
// returns that status response; it fails the test after within.
func (h *Harness) AwaitStatus(key, id string, status herald.NotificationStatus, within time.Duration) Response {
	h.T.Helper()
	var last Response
	h.Eventually(within, "notification "+id+" "+string(status), func() bool {
		last = h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+id, key, nil)
		return herald.NotificationStatus(last.Str("status")) == status
	})
	return last
}

// Fakes are the SendGrid, Twilio and FCM fakes (see providertest), speaking their
// wire protocols on loopback until the test ends.
type Fakes struct {
	SendGrid *providertest.SendGridFake
	Twilio   *providertest.TwilioFake
	FCM      *providertest.FCMFake
}

// StartFakes starts the three provider fakes, closed when the test ends.
func StartFakes(t testing.TB) Fakes {
	f := Fakes{SendGrid: providertest.NewSendGrid(), Twilio: providertest.NewTwilio(), FCM: providertest.NewFCM()}
	t.Cleanup(func() { f.SendGrid.Close(); f.Twilio.Close(); f.FCM.Close() })
	return f
}

// Process points the provider clients at the fakes; providers reach Herald at
// publicBaseURL and a provider call gives up after timeout.
func (f Fakes) Process(publicBaseURL string, timeout time.Duration) resolver.Process {
	return resolver.Process{SendGridBaseURL: f.SendGrid.URL, TwilioBaseURL: f.Twilio.URL, FCMBaseURL: f.FCM.URL, FCMTokenURL: f.FCM.TokenURL(),
		PublicBaseURL: publicBaseURL, HTTPClient: &http.Client{Timeout: timeout}}
}

// The test account the Configure helpers store (the fakes accept any credentials
// unless a test sets them).
const (
	SendGridAPIKey   = "SG.test-key"
	TwilioAccountSID = "AC0123456789abcdef0123456789abcdef"
	TwilioAuthToken  = "twilioauthtoken0123456789abcdef"
	TwilioFrom       = "+14155550000"
)

// PutProviderConfig stores a provider config as PUT /v1/providers would.
func (h *Harness) PutProviderConfig(pc providers.ProviderConfig) {
	h.T.Helper()
	if err := h.Providers.PutProviderConfig(context.Background(), pc); err != nil {
		h.T.Fatal(err)
	}
}

// ConfigureSendGrid makes SendGrid (API key SendGridAPIKey) the tenant's email
// provider; settings is the config's JSON settings (from, from_name,
// webhook_public_key).
func (h *Harness) ConfigureSendGrid(tenantID, settings string) {
	h.T.Helper()
	h.PutProviderConfig(providers.ProviderConfig{TenantID: tenantID, Channel: herald.ChannelEmail, Provider: "sendgrid", Enabled: true,
		Settings: json.RawMessage(settings), Secret: []byte(`{"api_key":"` + SendGridAPIKey + `"}`)})
}

// ConfigureTwilio makes the Twilio test account (sending from TwilioFrom) the
// tenant's SMS provider.
func (h *Harness) ConfigureTwilio(tenantID string) {
	h.T.Helper()
	h.PutProviderConfig(providers.ProviderConfig{TenantID: tenantID, Channel: herald.ChannelSMS, Provider: "twilio", Enabled: true,
		Settings: json.RawMessage(`{"account_sid":"` + TwilioAccountSID + `","from":"` + TwilioFrom + `"}`),
		Secret:   []byte(`{"auth_token":"` + TwilioAuthToken + `"}`)})
}

// ConfigureFCM makes FCM (project herald-test) the tenant's push provider, with a
// service account whose tokens come from tokenURI.
func (h *Harness) ConfigureFCM(tenantID, tokenURI string) {
	h.T.Helper()
	h.PutProviderConfig(providers.ProviderConfig{TenantID: tenantID, Channel: herald.ChannelPush, Provider: "fcm", Enabled: true,
		Settings: json.RawMessage(`{"project_id":"herald-test"}`), Secret: providertest.ServiceAccountJSON(h.T, tokenURI)})
}

// SentMail is a message the SendGrid fake accepted, with its decoded body.
type SentMail struct {
	providertest.Request
	Mail providertest.SendGridMail
}

// MailsFor returns the messages the SendGrid fake accepted for a notification
// (named by the custom_args Herald tags each message with), oldest first.
func MailsFor(t testing.TB, sg *providertest.SendGridFake, notificationID string) []SentMail {
	t.Helper()
	var out []SentMail
	for _, req := range sg.AcceptedRequests() {
		m, err := providertest.DecodeMail(req)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Personalizations) > 0 && m.Personalizations[0].CustomArgs["notification_id"] == notificationID {
			out = append(out, SentMail{Request: req, Mail: m})
		}
	}
	return out
}

// MailPart returns the content of a mail's part of the MIME type ("" if none).
func MailPart(m providertest.SendGridMail, typ string) string {
	for _, c := range m.Content {
		if c.Type == typ {
			return c.Value
		}
	}
	return ""
}
