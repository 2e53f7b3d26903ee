package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/secrets"
	"github.com/herald-notify/herald/internal/store"
)

// Settings are the process-wide webhook settings (internal/config).
type Settings struct {
	// TaskQueue is the base task queue; the endpoint workflows run on
	// contract.WebhookTaskQueue(TaskQueue), apart from notification delivery.
	TaskQueue string
	// Retry is the backoff of one message (zero fields: the defaults).
	Retry contract.WebhookRetry
}

// Event is one delivery state change.
type Event struct {
	TenantID       string
	NotificationID string
	Channel        herald.Channel
	// Status is the delivery status (herald.Delivery*) or, for a dead letter,
	// failed with Type EventDeliveryDeadLettered.
	Status   herald.DeliveryStatus
	Type     string
	Reason   herald.Reason
	Provider string
	Error    string
	// KeyExtra tells apart events that may repeat for one channel (a dead
	// letter's id: a redrive can dead-letter again).
	KeyExtra string
	// Data, when set, is the payload's data instead of the delivery's (a
	// campaign event); NotificationID then orders it (the campaign id).
	Data any
}

// Payload is the JSON body tenants receive.
type Payload struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	// Data is a PayloadData, or a CampaignData for campaign events.
	Data any `json:"data"`
}

// CampaignData describes a finished campaign.
type CampaignData struct {
	CampaignID   string `json:"campaign_id"`
	Status       string `json:"status"`
	AudienceSize int64  `json:"audience_size"`
}

// PayloadData describes the delivery.
type PayloadData struct {
	NotificationID string                `json:"notification_id"`
	Channel        herald.Channel        `json:"channel"`
	Status         herald.DeliveryStatus `json:"status"`
	Reason         herald.Reason         `json:"reason,omitempty"`
	Provider       string                `json:"provider,omitempty"`
	Error          string                `json:"error,omitempty"`
}

// Emitter queues events and wakes the endpoints' workflows. A nil *Emitter
// emits nothing.
type Emitter struct {
	Store    *store.Store
	Temporal client.Client
	Settings Settings
	Log      *slog.Logger
}

// Emit queues ev for every subscribed endpoint of its tenant (idempotent: the
// same event again queues nothing) and wakes their workflows. The queue row
// is what counts: a wake-up that fails is logged, and the endpoint's next
// event or a replay sends the message.
func (e *Emitter) Emit(ctx context.Context, ev Event) error {
	if e == nil {
		return nil
	}
	we, ok, err := queued(ev)
	if err != nil || !ok {
		return err
	}
	eps, err := e.Store.EnqueueWebhookEvent(ctx, we, NewMessageID)
	if err != nil {
		return fmt.Errorf("queue webhook event: %w", err)
	}
	for _, ep := range eps {
		e.Wake(ctx, ev.TenantID, ep)
	}
	return nil
}

// EmitMany is Emit for many events (a campaign chunk's deliveries): the
// events of one tenant and type are queued together, one statement for the
// endpoints and one per subscribed endpoint, and each endpoint is woken once.
func (e *Emitter) EmitMany(ctx context.Context, evs []Event) error {
	if e == nil || len(evs) == 0 {
		return nil
	}
	type group struct{ tenant, typ string }
	groups := map[group][]store.WebhookEvent{}
	var order []group
	for _, ev := range evs {
		we, ok, err := queued(ev)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		g := group{ev.TenantID, we.Type}
		if _, seen := groups[g]; !seen {
			order = append(order, g)
		}
		groups[g] = append(groups[g], we)
	}
	for _, g := range order {
		eps, err := e.Store.EnqueueWebhookEvents(ctx, g.tenant, g.typ, groups[g], NewMessageID)
		if err != nil {
			return fmt.Errorf("queue webhook events: %w", err)
		}
		for _, ep := range eps {
			e.Wake(ctx, g.tenant, ep)
		}
	}
	return nil
}

// queued is ev as the queue stores it; false for an event of no type (a status
// that is not a tenant event).
func queued(ev Event) (store.WebhookEvent, bool, error) {
	if ev.Type == "" {
		ev.Type = herald.DeliveryEvent(ev.Status)
	}
	if ev.Type == "" {
		return store.WebhookEvent{}, false, nil
	}
	var data any = PayloadData{NotificationID: ev.NotificationID, Channel: ev.Channel, Status: ev.Status, Reason: ev.Reason,
		Provider: ev.Provider, Error: ev.Error}
	if ev.Data != nil {
		data = ev.Data
	}
	body, err := json.Marshal(Payload{Type: ev.Type, Timestamp: time.Now().UTC(), Data: data})
	if err != nil {
		return store.WebhookEvent{}, false, err
	}
	key := ev.NotificationID + ":" + string(ev.Channel) + ":" + ev.Type
	if ev.KeyExtra != "" {
		key += ":" + ev.KeyExtra
	}
	return store.WebhookEvent{TenantID: ev.TenantID, NotificationID: ev.NotificationID, Key: key, Type: ev.Type, Payload: body}, true, nil
}

// Wake starts the endpoint's workflow, or signals it when it runs.
func (e *Emitter) Wake(ctx context.Context, tenantID, endpointID string) {
	if e == nil || e.Temporal == nil {
		return
	}
	in := contract.WebhookEndpointInput{TenantID: tenantID, EndpointID: endpointID, Retry: e.Settings.Retry}
	_, err := e.Temporal.SignalWithStartWorkflow(ctx, contract.WebhookEndpointWorkflowID(tenantID, endpointID), contract.SignalWebhookWake, nil,
		client.StartWorkflowOptions{TaskQueue: contract.WebhookTaskQueue(e.Settings.TaskQueue),
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE},
		contract.WebhookEndpointWorkflow, in)
	if err != nil && e.Log != nil {
		e.Log.Warn("waking the webhook endpoint's workflow failed; its next event or a replay sends the queue", "endpoint", endpointID, "error", err)
	}
}

// NewMessageID mints a message id (the webhook-id header), msg_ + 32 hex digits.
func NewMessageID() string { return "msg_" + randomHex(16) }

// NewEndpointID mints an endpoint id, we_ + 24 hex digits.
func NewEndpointID() string { return "we_" + randomHex(12) }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on a supported platform
	}
	return hex.EncodeToString(b)
}

// Sealing: the secret is sealed with the process keyring, bound to the
// endpoint so a sealed value cannot be moved to another row.
func aad(tenantID, endpointID string) []byte {
	return []byte("webhook-endpoint:" + tenantID + "/" + endpointID)
}

// Seal seals an endpoint's secret.
func Seal(keys *secrets.Keyring, tenantID, endpointID, secret string) ([]byte, error) {
	return keys.Seal([]byte(secret), aad(tenantID, endpointID))
}

// Open opens a sealed endpoint secret.
func Open(keys *secrets.Keyring, tenantID, endpointID string, sealed []byte) (string, error) {
	b, err := keys.Open(sealed, aad(tenantID, endpointID))
	return string(b), err
}

// MaxURLLen bounds an endpoint URL.
const MaxURLLen = 2048

// ValidateURL checks an endpoint URL: absolute http(s), no credentials, and
// a host the egress policy lets Herald reach (resolved now, for a clear
// error; the policy checks again at every connection).
func ValidateURL(ctx context.Context, policy *egress.Policy, raw string) error {
	if len(raw) > MaxURLLen {
		return fmt.Errorf("url is longer than %d characters", MaxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return errors.New("url must be an absolute http:// or https:// URL")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return errors.New("url must use https (or http)")
	}
	if u.User != nil {
		return errors.New("url must not carry credentials")
	}
	if u.Fragment != "" {
		return errors.New("url must not have a fragment")
	}
	port := uint16(443)
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return errors.New("url has an invalid port")
		}
		port = uint16(n)
	}
	if err := policy.CheckHost(ctx, u.Hostname(), port); err != nil {
		return fmt.Errorf("url host %s is not reachable under the egress policy: %s", u.Hostname(), refusal(err))
	}
	return nil
}

// RedactURL is how an endpoint URL appears in logs, attempt errors and the
// audit log: scheme and host (with its port) only. The path, query, user info
// and fragment often carry a secret (a token in the query, a key in the path,
// as Slack's and many others' incoming-webhook URLs do), so they are replaced
// by "…": "https://hooks.example.com/…?…".
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "[url redacted]"
	}
	out := u.Scheme + "://" + u.Host
	if u.Path != "" && u.Path != "/" || u.Opaque != "" {
		out += "/…"
	}
	if u.RawQuery != "" || u.ForceQuery {
		out += "?…"
	}
	return out
}

// redactErr hides the URL an HTTP client error quotes (a *url.Error carries
// the whole URL: `Post "https://…/hook?token=…": dial tcp …`).
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = RedactURL(ue.URL)
	}
	return err
}

func refusal(err error) string {
	if re, ok := egress.AsRefused(err); ok {
		return re.Why
	}
	return strings.TrimPrefix(err.Error(), egress.ErrRefused.Error()+": ")
}

// Sender makes the signed HTTP requests.
type Sender struct {
	Store *store.Store
	Keys  *secrets.Keyring
	// Client goes through the egress policy (and refuses redirects).
	Client *http.Client
}

// Outcome is one attempt's result.
type Outcome struct {
	StatusCode int
	Err        error
	Took       time.Duration
}

// ErrEndpointGone: the endpoint or the message was deleted; nothing to send.
var ErrEndpointGone = errors.New("webhooks: endpoint or message gone")

// ErrEndpointDisabled: the endpoint is disabled; the message is not sent.
var ErrEndpointDisabled = errors.New("webhooks: endpoint disabled")

// Send sends one message to its endpoint, signed with the endpoint's current
// secret (and a rotated-out one still within its grace).
func (s *Sender) Send(ctx context.Context, tenantID, endpointID string, messageID int64) (Outcome, error) {
	ep, err := s.Store.GetWebhookEndpoint(ctx, tenantID, endpointID)
	if errors.Is(err, herald.ErrNotFound) {
		return Outcome{}, ErrEndpointGone
	}
	if err != nil {
		return Outcome{}, err
	}
	msg, err := s.Store.GetWebhookMessage(ctx, tenantID, endpointID, messageID)
	if errors.Is(err, herald.ErrNotFound) {
		return Outcome{}, ErrEndpointGone
	}
	if err != nil {
		return Outcome{}, err
	}
	if msg.Status != store.WebhookPending {
		return Outcome{}, ErrEndpointGone
	}
	if !ep.Enabled {
		return Outcome{}, ErrEndpointDisabled
	}
	keys, err := s.signingKeys(ep)
	if err != nil {
		return Outcome{}, err
	}
	now := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, strings.NewReader(string(msg.Payload)))
	if err != nil {
		return Outcome{}, redactErr(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Herald-Webhooks/1")
	req.Header.Set(HeaderID, msg.MsgID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(HeaderSignature, SignatureHeader(keys, msg.MsgID, now, msg.Payload))
	resp, err := s.Client.Do(req)
	out := Outcome{Took: time.Since(now)}
	if err != nil {
		// The error is logged, returned to Temporal and stored: no URL in it.
		out.Err = redactErr(err)
		return out, nil //nolint:nilerr // a failed attempt is an outcome to record and retry, not an error of Send
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	out.StatusCode = resp.StatusCode
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		out.Err = fmt.Errorf("the endpoint answered HTTP %d", resp.StatusCode)
	}
	return out, nil
}

func (s *Sender) signingKeys(ep store.WebhookEndpoint) ([][]byte, error) {
	cur, err := Open(s.Keys, ep.TenantID, ep.ID, ep.SecretSealed)
	if err != nil {
		return nil, fmt.Errorf("open the endpoint's secret: %w", err)
	}
	k, err := DecodeSecret(cur)
	if err != nil {
		return nil, err
	}
	keys := [][]byte{k}
	if ep.PreviousSealed != nil && ep.PreviousUntil != nil && time.Now().Before(*ep.PreviousUntil) {
		if prev, err := Open(s.Keys, ep.TenantID, ep.ID, ep.PreviousSealed); err == nil {
			if pk, err := DecodeSecret(prev); err == nil {
				keys = append(keys, pk)
			}
		}
	}
	return keys, nil
}

// ErrorText bounds an attempt's error as stored for the tenant (an address
// behind a refused name is not revealed: a RefusedError says its host only).
func ErrorText(err error) string {
	if re, ok := egress.AsRefused(err); ok {
		return "egress: connection to " + re.Host + " refused: " + re.Why
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out"
	}
	s := err.Error()
	if len(s) > 500 {
		s = s[:500]
	}
	return s
}
