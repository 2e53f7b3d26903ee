package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/apitest"
)

// receiver is a tenant's webhook endpoint: it verifies every request with the
// Standard Webhooks reference library (an implementation independent of
// Herald's) and records what it accepted. While down it answers 503.
type receiver struct {
	t    *testing.T
	srv  *httptest.Server
	down atomic.Bool

	mu        sync.Mutex
	verifiers []*standardwebhooks.Webhook
	accepted  []received
	requests  int
	badSigs   int
}

type received struct {
	ID        string
	Timestamp string
	Signature string
	Body      []byte
	Payload   struct {
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Data      struct {
			NotificationID string `json:"notification_id"`
			Channel        string `json:"channel"`
			Status         string `json:"status"`
			Reason         string `json:"reason"`
			Provider       string `json:"provider"`
		} `json:"data"`
	}
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// trust makes the receiver verify with secret (every trusted secret must verify).
func (r *receiver) trust(secret string) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		r.t.Fatalf("the reference library refuses the secret %q: %v", secret, err)
	}
	r.mu.Lock()
	r.verifiers = append(r.verifiers, wh)
	r.mu.Unlock()
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	for _, v := range r.verifiers {
		if err := v.Verify(body, req.Header); err != nil {
			r.badSigs++
			r.t.Errorf("the reference verifier refused a Herald webhook: %v", err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
	}
	if r.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	m := received{ID: req.Header.Get("webhook-id"), Timestamp: req.Header.Get("webhook-timestamp"),
		Signature: req.Header.Get("webhook-signature"), Body: body}
	if err := json.Unmarshal(body, &m.Payload); err != nil {
		r.t.Errorf("webhook body is not JSON: %v", err)
	}
	r.accepted = append(r.accepted, m)
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) got() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.accepted...)
}

// events lists the accepted events of a notification in arrival order,
// "type/channel", each message once (a replay is a second arrival).
func (r *receiver) events(notificationID string) []string {
	var out []string
	for _, m := range r.got() {
		if m.Payload.Data.NotificationID == notificationID {
			out = append(out, m.Payload.Type+"/"+m.Payload.Data.Channel)
		}
	}
	return out
}

func createEndpoint(t *testing.T, h *apitest.Harness, key string, body map[string]any) (id, secret string) {
	t.Helper()
	r := h.MustDo(http.StatusCreated, http.MethodPost, "/v1/webhook-endpoints", key, body)
	ep, _ := r.JSON["endpoint"].(map[string]any)
	return ep["id"].(string), r.Str("secret")
}

// TestWebhooksSignedOrderedIsolated: a tenant's endpoint receives every
// delivery state change signed as the Standard Webhooks library verifies it;
// while the endpoint is down the messages are retried and arrive, in order per
// notification, once it recovers, each attempt listed; another tenant's
// endpoint never receives them; forged and replayed messages are detectable;
// a rotated secret and the previous one both verify during the grace; a
// disabled endpoint receives nothing.
func TestWebhooksSignedOrderedIsolated(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{})
	_, keyA := h.TenantWith("hooks-a", "order")
	_, keyB := h.TenantWith("hooks-b", "order")
	h.PutUser(keyA, "ada", map[string]any{"email": "ada@example.com"})
	h.PutUser(keyB, "bob", map[string]any{"email": "bob@example.com"})

	recvA, recvB := newReceiver(t), newReceiver(t)
	recvA.down.Store(true)
	epA, secretA := createEndpoint(t, h, keyA, map[string]any{"url": recvA.srv.URL + "/hooks", "description": "shop"})
	recvA.trust(secretA)
	_, secretB := createEndpoint(t, h, keyB, map[string]any{"url": recvB.srv.URL + "/hooks",
		"events": []string{"delivery.sent", "delivery.delivered", "delivery.suppressed"}})
	recvB.trust(secretB)
	if len(secretA) < 10 || secretA[:6] != "whsec_" || secretA == secretB {
		t.Fatalf("secrets %q %q", secretA, secretB)
	}
	// The secret is shown once: never in a read.
	if g := h.MustDo(http.StatusOK, http.MethodGet, "/v1/webhook-endpoints/"+epA, keyA, nil); g.JSON["secret"] != nil {
		t.Fatalf("GET shows the secret: %s", g.Body)
	}
	if l := h.MustDo(http.StatusOK, http.MethodGet, "/v1/webhook-endpoints", keyB, nil); len(l.JSON["items"].([]any)) != 1 {
		t.Fatalf("tenant B lists %s", l.Body)
	}
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/webhook-endpoints/"+epA, keyB, nil), http.StatusNotFound, "not_found", "")

	// Tenant A: email (sandbox: sent) + in-app (delivered), and SMS to a user without a phone (suppressed).
	submit := func(key, user string, channels ...string) string {
		return h.Accept(key, map[string]any{"user_id": user, "template_id": "order", "channels": channels, "idempotency_key": freshKey("wh")})
	}
	n1 := submit(keyA, "ada", "email", "in_app")
	n2 := submit(keyA, "ada", "sms")
	nb := submit(keyB, "bob", "email")
	h.AwaitChannel(keyA, n1, "email", "sent", "", 10*time.Second)
	h.AwaitChannel(keyA, n2, "sms", "suppressed", "no_address", 10*time.Second)

	// A is down: Herald retries; then it recovers and everything arrives.
	h.Eventually(10*time.Second, "failed attempts while A is down", func() bool {
		recvA.mu.Lock()
		defer recvA.mu.Unlock()
		return recvA.requests >= 4
	})
	if len(recvA.got()) != 0 {
		t.Fatal("accepted while down")
	}
	recvA.down.Store(false)
	h.Eventually(20*time.Second, "A's events after it recovered", func() bool { return len(recvA.got()) >= 3 })
	h.Eventually(10*time.Second, "B's event", func() bool { return len(recvB.got()) >= 1 })

	if ev := recvA.events(n2); len(ev) != 1 || ev[0] != "delivery.suppressed/sms" {
		t.Errorf("n2 events %v", ev)
	}
	ev1 := recvA.events(n1)
	if len(ev1) != 2 {
		t.Errorf("n1 events %v", ev1)
	}
	// In order per notification: arrival order is queue (emission) order.
	var last time.Time
	seen := map[string]bool{}
	for _, m := range recvA.got() {
		if seen[m.ID] {
			t.Errorf("message %s accepted twice", m.ID)
		}
		seen[m.ID] = true
		if m.Payload.Data.NotificationID != n1 {
			continue
		}
		if m.Payload.Timestamp.Before(last) {
			t.Errorf("n1's events arrived out of order: %v", ev1)
		}
		last = m.Payload.Timestamp
	}
	// Isolation: each receiver got only its tenant's notifications.
	for _, m := range recvA.got() {
		if m.Payload.Data.NotificationID == nb {
			t.Errorf("tenant A's endpoint received tenant B's event %s", m.Body)
		}
	}
	for _, m := range recvB.got() {
		if m.Payload.Data.NotificationID != nb {
			t.Errorf("tenant B's endpoint received %s", m.Body)
		}
	}

	// Every attempt is listed: the 503s first, then the deliveries (each
	// recorded right after its answer).
	var att apitest.Response
	h.Eventually(10*time.Second, "three delivered attempts listed", func() bool {
		att = h.MustDo(http.StatusOK, http.MethodGet, "/v1/webhook-endpoints/"+epA+"/attempts?status=delivered", keyA, nil)
		n := 0
		for _, it := range att.JSON["items"].([]any) {
			if it.(map[string]any)["outcome"] == "delivered" {
				n++
			}
		}
		return n == 3
	})
	att = h.MustDo(http.StatusOK, http.MethodGet, "/v1/webhook-endpoints/"+epA+"/attempts?limit=200", keyA, nil)
	failed, delivered := 0, 0
	for _, it := range att.JSON["items"].([]any) {
		a := it.(map[string]any)
		switch a["outcome"] {
		case "failed":
			if a["status_code"] != float64(503) {
				t.Errorf("failed attempt %v", a)
			}
			failed++
		case "delivered":
			delivered++
		}
	}
	if failed < 1 || delivered != 3 {
		t.Errorf("attempts: %d failed, %d delivered: %s", failed, delivered, att.Body)
	}

	// A forged body, or a genuine message replayed later, is detectable.
	m := recvA.got()[0]
	hdr := http.Header{}
	hdr.Set("webhook-id", m.ID)
	hdr.Set("webhook-timestamp", m.Timestamp)
	hdr.Set("webhook-signature", m.Signature)
	verifier, _ := standardwebhooks.NewWebhook(secretA)
	if err := verifier.Verify(m.Body, hdr); err != nil {
		t.Fatalf("genuine message refused: %v", err)
	}
	if err := verifier.Verify(append([]byte(nil), append(m.Body[:len(m.Body)-1], []byte(`,"x":1}`)...)...), hdr); err == nil {
		t.Error("a forged body verified")
	}
	old := time.Now().Add(-10 * time.Minute)
	oldSig, _ := verifier.Sign(m.ID, old, m.Body)
	replay := http.Header{}
	replay.Set("webhook-id", m.ID)
	replay.Set("webhook-timestamp", strconv.FormatInt(old.Unix(), 10))
	replay.Set("webhook-signature", oldSig)
	if err := verifier.Verify(m.Body, replay); err == nil {
		t.Error("a message signed 10 minutes ago verified (replay not detectable)")
	}
	if err := verifier.VerifyIgnoringTimestamp(m.Body, replay); err != nil {
		t.Errorf("the replayed message's signature itself should be genuine: %v", err)
	}
	hdr.Set("webhook-timestamp", strconv.FormatInt(old.Unix(), 10))
	if err := verifier.Verify(m.Body, hdr); err == nil {
		t.Error("a changed timestamp verified")
	}

	// Rotation: the new secret and the previous one both verify the next message.
	rot := h.MustDo(http.StatusOK, http.MethodPost, "/v1/webhook-endpoints/"+epA+"/rotate-secret", keyA, nil)
	newSecret := rot.Str("secret")
	if newSecret == secretA || newSecret == "" {
		t.Fatalf("rotation answered %s", rot.Body)
	}
	recvA.trust(newSecret) // both verifiers must pass now
	n3 := submit(keyA, "ada", "in_app")
	h.Eventually(10*time.Second, "the event after the rotation", func() bool { return len(recvA.events(n3)) == 1 })

	// Disabled: nothing new arrives.
	h.MustDo(http.StatusOK, http.MethodPatch, "/v1/webhook-endpoints/"+epA, keyA, map[string]any{"enabled": false})
	n4 := submit(keyA, "ada", "in_app")
	h.AwaitChannel(keyA, n4, "in_app", "delivered", "", 10*time.Second)
	time.Sleep(time.Second)
	if ev := recvA.events(n4); len(ev) != 0 {
		t.Errorf("a disabled endpoint received %v", ev)
	}
	if recvA.badSigs+recvB.badSigs != 0 {
		t.Errorf("%d bad signatures", recvA.badSigs+recvB.badSigs)
	}
}

// TestWebhookEndpointValidation: URLs the egress policy refuses, unknown
// events and malformed URLs are refused with the field named.
func TestWebhookEndpointValidation(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.Tenant("hooks-validation")
	for _, u := range []string{"http://10.0.0.1/hook", "http://169.254.169.254/latest", "http://[::1]:8080/x", "http://[fd00::1]/x",
		"ftp://example.com/x", "/relative", "https://user:pw@example.com/x"} {
		apitest.WantError(t, h.Do(http.MethodPost, "/v1/webhook-endpoints", key, map[string]any{"url": u}), http.StatusUnprocessableEntity, "invalid_url", "url")
	}
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/webhook-endpoints", key, map[string]any{"url": "http://127.0.0.1:9/x", "events": []string{"delivery.nope"}}),
		http.StatusBadRequest, "unknown_event", "events[0]")
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/webhook-endpoints", key, map[string]any{}), http.StatusBadRequest, "missing_field", "url")
	// The harness's operator allowed 127.0.0.1 (HERALD_EGRESS_ALLOW), so a local receiver is fine.
	createEndpoint(t, h, key, map[string]any{"url": "http://127.0.0.1:9/hook"})
}

// TestWebhookDeadLetterAndReplay: a message an endpoint keeps refusing is
// dead-lettered when its retries run out, with every attempt listed; replayed
// one by one or by time range once the endpoint works, it arrives.
func TestWebhookDeadLetterAndReplay(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{WebhookRetry: contract.WebhookRetry{Initial: 100 * time.Millisecond, MaxInterval: 300 * time.Millisecond, For: 2 * time.Second}})
	_, key := h.TenantWith("hooks-dlq", "order")
	h.PutUser(key, "ada", map[string]any{"email": "ada@example.com"})
	recv := newReceiver(t)
	recv.down.Store(true)
	ep, secret := createEndpoint(t, h, key, map[string]any{"url": recv.srv.URL, "events": []string{"delivery.delivered"}})
	recv.trust(secret)
	start := time.Now().Add(-time.Second)
	n := h.Accept(key, map[string]any{"user_id": "ada", "template_id": "order", "channels": []string{"in_app"}, "idempotency_key": freshKey("dlq")})

	var dead []any
	h.Eventually(20*time.Second, "the message to be dead-lettered", func() bool {
		r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/webhook-endpoints/"+ep+"/attempts?status=dead_lettered", key, nil)
		dead = r.JSON["items"].([]any)
		return len(dead) > 0
	})
	if len(dead) < 2 {
		t.Errorf("dead-lettered after %d attempts, want retries first", len(dead))
	}
	msgID := dead[0].(map[string]any)["message_id"].(string)
	recv.down.Store(false)
	time.Sleep(500 * time.Millisecond)
	if len(recv.events(n)) != 0 {
		t.Fatal("a dead-lettered message arrived without a replay")
	}
	r := h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/webhook-endpoints/"+ep+"/messages/"+msgID+"/replay", key, nil)
	if r.JSON["replayed"] != float64(1) {
		t.Fatalf("replay: %s", r.Body)
	}
	h.Eventually(10*time.Second, "the replayed message", func() bool { return len(recv.events(n)) == 1 })
	if got := recv.got()[0]; got.ID != msgID {
		t.Errorf("replayed message id %s, want %s", got.ID, msgID)
	}
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/webhook-endpoints/"+ep+"/messages/msg_0000/replay", key, nil), http.StatusNotFound, "not_found", "")

	// By time range: the delivered message again.
	body := map[string]any{"since": start.UTC().Format(time.RFC3339), "until": time.Now().Add(time.Minute).UTC().Format(time.RFC3339)}
	if r := h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/webhook-endpoints/"+ep+"/replay", key, body); r.JSON["replayed"] != float64(1) {
		t.Fatalf("range replay: %s", r.Body)
	}
	h.Eventually(10*time.Second, "the range-replayed message", func() bool { return len(recv.events(n)) == 2 })
}

// TestWebhookEventsFromProviderReceipts: a provider's receipt that moves a
// delivery (SendGrid: delivered; a bounce: failed) reaches the tenant's
// endpoint after the sent event, in that order.
func TestWebhookEventsFromProviderReceipts(t *testing.T) {
	t.Parallel()
	e := startFailEnv(t, 10*time.Second)
	recv := newReceiver(t)
	_, secret := createEndpoint(t, e.h, e.key, map[string]any{"url": recv.srv.URL})
	recv.trust(secret)
	ok := e.mustNotify(t, "queued", nil, "email")
	bounced := e.mustNotify(t, "queued", nil, "email")
	var msgIDs []string
	for _, id := range []string{ok, bounced} {
		c := e.h.AwaitChannel(e.key, id, "email", "sent", "", 10*time.Second)
		msgIDs = append(msgIDs, c["provider_message_id"].(string))
	}
	now := time.Now()
	bounce := sgEv(e.tenantID, bounced, msgIDs[1], "bounce", "ev-b", now.Unix())
	bounce["type"], bounce["status"], bounce["reason"] = "bounce", "5.1.1", "550 5.1.1 no such user"
	batch := sgBatch(t, sgEv(e.tenantID, ok, msgIDs[0], "delivered", "ev-d", now.Unix()), bounce)
	e.h.MustDo(http.StatusOK, http.MethodPost, "/v1/webhooks/sendgrid", "", batch, e.sign(batch)...)
	e.h.Eventually(10*time.Second, "the receipts' events", func() bool {
		return len(recv.events(ok)) == 2 && len(recv.events(bounced)) == 2
	})
	if ev := recv.events(ok); ev[0] != "delivery.sent/email" || ev[1] != "delivery.delivered/email" {
		t.Errorf("delivered notification's events %v", ev)
	}
	if ev := recv.events(bounced); ev[0] != "delivery.sent/email" || ev[1] != "delivery.failed/email" {
		t.Errorf("bounced notification's events %v", ev)
	}
}

// TestWebhookCampaignCompleted: an endpoint subscribed to campaign.completed
// receives one, signed, when a campaign has sent to its whole audience (and
// no delivery events, which it did not subscribe to); the campaign metrics move.
func TestWebhookCampaignCompleted(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{CampaignPageSize: 10})
	tenantID, key := h.TenantWith("hooks-campaign", "promo")
	users := campaignUsers(t, h, tenantID, "c", 5)
	recv := newReceiver(t)
	_, secret := createEndpoint(t, h, key, map[string]any{"url": recv.srv.URL, "events": []string{"campaign.completed"}})
	recv.trust(secret)
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "hooked", "template_id": "promo",
		"channels": []string{"in_app", "email"}, "audience": map[string]any{"user_ids": users}})
	awaitCampaign(h, key, "hooked", "completed", 60*time.Second)
	h.Eventually(10*time.Second, "campaign.completed", func() bool { return len(recv.got()) >= 1 })
	time.Sleep(300 * time.Millisecond)
	got := recv.got()
	if len(got) != 1 || got[0].Payload.Type != "campaign.completed" {
		t.Fatalf("received %d messages, first %s", len(got), got[0].Body)
	}
	var body struct {
		Data struct {
			CampaignID   string `json:"campaign_id"`
			Status       string `json:"status"`
			AudienceSize int    `json:"audience_size"`
		} `json:"data"`
	}
	if err := json.Unmarshal(got[0].Body, &body); err != nil || body.Data.CampaignID != "hooked" || body.Data.Status != "completed" || body.Data.AudienceSize != 5 {
		t.Fatalf("campaign.completed body %s (%v)", got[0].Body, err)
	}
	s := h.Scrape()
	if s.Value("herald_campaigns_finished_total", "status", "completed") != 1 || s.Value("herald_campaign_recipients_total", "outcome", "delivered") < 5 {
		t.Errorf("campaign metrics: %v %v", s["herald_campaigns_finished_total"], s["herald_campaign_recipients_total"])
	}
}
