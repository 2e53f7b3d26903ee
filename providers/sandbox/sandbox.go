// Package sandbox is the provider for tenants that configured no credentials: it
// records each message instead of sending it, so the dev stack runs end to end
// with no accounts and GET /v1/sandbox/messages can show what would have been
// sent.
//
// It is idempotent, as a provider with idempotency keys would be: a send repeated
// with the same idempotency key ("notification_id:channel") to the same recipient
// records nothing new and is answered with the first call's message id, singly
// or in a batch, whatever the order of concurrent calls. The message's Calls
// counts the repeats, which SendGrid, Twilio and FCM (no idempotency keys, see
// package providers) would have delivered again. The PostgreSQL recorder also
// records an "accepted" receipt for email and SMS, as their webhooks would, for
// the delivery guard's receipt check (see PGRecorder).
package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/herald-notify/herald/providers"
)

// Name is the provider name in Results.
const Name = "sandbox"

// messageIDPrefix prefixes a message's id in Results and receipts.
const messageIDPrefix = "sandbox-"

// Message is one recorded send.
type Message = providers.SandboxMessage

// Recorder stores recorded messages.
type Recorder = providers.SandboxRecorder

// List limits.
const (
	DefaultLimit = providers.SandboxDefaultLimit
	MaxLimit     = providers.SandboxMaxLimit
)

// ClampLimit maps a requested limit to 1..MaxLimit (DefaultLimit when out of range).
func ClampLimit(limit int) int { return providers.ClampSandboxLimit(limit) }

// Provider implements every channel's sender by recording.
type Provider struct {
	rec Recorder
}

var (
	_ providers.EmailSender = (*Provider)(nil)
	_ providers.SMSSender   = (*Provider)(nil)
	_ providers.PushSender  = (*Provider)(nil)
)

// New returns a sandbox provider recording into rec.
func New(rec Recorder) *Provider { return &Provider{rec: rec} }

func (p *Provider) record(ctx context.Context, tags providers.Tags, key, recipient, subject, body string, payload any) (providers.Result, error) {
	if err := tags.Validate(); err != nil {
		return providers.Result{}, providers.Errorf(Name, "bad_request", "%v", err)
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return providers.Result{}, providers.Errorf(Name, "bad_request", "%v", err)
	}
	if key == "" {
		key = tags.IdempotencyKey()
	}
	m, err := p.rec.Record(ctx, Message{TenantID: tags.TenantID, NotificationID: tags.NotificationID, Channel: tags.Channel,
		IdempotencyKey: key, Recipient: recipient, Subject: subject, Body: body, Payload: raw})
	if err != nil {
		// The store being down is transient.
		return providers.Result{}, &providers.Error{Provider: Name, Code: "record", Reason: err.Error(), Err: err}
	}
	return providers.Result{Provider: Name, ProviderMessageID: messageIDPrefix + strconv.FormatInt(m.ID, 10)}, nil
}

// SendEmail records msg.
func (p *Provider) SendEmail(ctx context.Context, msg providers.EmailMessage, key string, tags providers.Tags) (providers.Result, error) {
	if msg.To == "" {
		return providers.Result{}, providers.NoEmailAddress(Name)
	}
	body := msg.Text
	if body == "" {
		body = msg.HTML
	}
	return p.record(ctx, tags, key, msg.To, msg.Subject, body, msg)
}

// MaxEmailBatch: the sandbox records batches of any size SendGrid would take.
func (p *Provider) MaxEmailBatch() int { return 1000 }

// SendEmailBatch records one message per recipient (one statement when the
// recorder can batch), idempotent per recipient as SendEmail. The result's id
// is the batch's first message's (the lowest id), so a repeated batch is
// answered with the same id.
//
// Each recipient's substitutions are applied to its message (see
// providers.EmailMessage.Personalize), so what is recorded is what that
// recipient would receive; substitutions providers.CheckSubstitutions refuses
// fail the whole call, as they do at SendGrid.
func (p *Provider) SendEmailBatch(ctx context.Context, msg providers.EmailMessage, to []providers.BatchRecipient) (providers.Result, error) {
	msgs := make([]Message, 0, len(to))
	for _, r := range to {
		if r.To == "" {
			return providers.Result{}, providers.NoEmailAddress(Name)
		}
		if err := r.Tags.Validate(); err != nil {
			return providers.Result{}, providers.Errorf(Name, "bad_request", "%v", err)
		}
		if err := providers.CheckSubstitutions(Name, msg, r.Substitutions); err != nil {
			return providers.Result{}, err
		}
		one := msg.Personalize(r.Substitutions)
		one.To, one.Headers = r.To, r.Headers
		raw, err := json.Marshal(one)
		if err != nil {
			return providers.Result{}, providers.Errorf(Name, "bad_request", "%v", err)
		}
		body := one.Text
		if body == "" {
			body = one.HTML
		}
		msgs = append(msgs, Message{TenantID: r.Tags.TenantID, NotificationID: r.Tags.NotificationID, Channel: r.Tags.Channel,
			IdempotencyKey: r.Tags.IdempotencyKey(), Recipient: r.To, Subject: one.Subject, Body: body, Payload: raw})
	}
	recorded, err := p.recordBatch(ctx, msgs)
	if err != nil {
		return providers.Result{}, &providers.Error{Provider: Name, Code: "record", Reason: err.Error(), Err: err}
	}
	var first int64
	for i, m := range recorded {
		if i == 0 || m.ID < first {
			first = m.ID
		}
	}
	return providers.Result{Provider: Name, ProviderMessageID: "sandbox-batch-" + strconv.FormatInt(first, 10)}, nil
}

// recordBatch records msgs in one call when the recorder can batch, else one
// Record each.
func (p *Provider) recordBatch(ctx context.Context, msgs []Message) ([]Message, error) {
	if br, ok := p.rec.(interface {
		RecordBatch(context.Context, []Message) ([]Message, error)
	}); ok {
		return br.RecordBatch(ctx, msgs)
	}
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		var err error
		if out[i], err = p.rec.Record(ctx, m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SendSMS records msg.
func (p *Provider) SendSMS(ctx context.Context, msg providers.SMSMessage, key string, tags providers.Tags) (providers.Result, error) {
	if msg.To == "" {
		return providers.Result{}, &providers.Error{Provider: Name, Code: "invalid_number", Reason: "recipient has no phone number", Permanent: true}
	}
	return p.record(ctx, tags, key, msg.To, "", msg.Body, msg)
}

// SendPush records msg.
func (p *Provider) SendPush(ctx context.Context, msg providers.PushMessage, key string, tags providers.Tags) (providers.Result, error) {
	if msg.Token == "" {
		return providers.Result{}, &providers.Error{Provider: Name, Code: "invalid_token", Reason: "device token is empty", Permanent: true, DeadToken: true}
	}
	return p.record(ctx, tags, key, msg.Token, msg.Title, msg.Body, msg)
}

// MemoryRecorder keeps messages in memory (tests, and a dev process without a
// database), idempotent as Recorder says. Safe for concurrent use.
type MemoryRecorder struct {
	mu   sync.Mutex
	msgs []Message
	// index: tenant, idempotency key and recipient → position in msgs.
	index map[[3]string]int
}

// Record implements Recorder.
func (r *MemoryRecorder) Record(_ context.Context, m Message) (Message, error) {
	if m.TenantID == "" {
		return m, errors.New("sandbox: message has no tenant")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := [3]string{m.TenantID, m.IdempotencyKey, m.Recipient}
	if i, ok := r.index[k]; ok {
		o := &r.msgs[i]
		o.Calls++
		m.ID, m.CreatedAt, m.Calls = o.ID, o.CreatedAt, o.Calls
		return m, nil
	}
	if r.index == nil {
		r.index = map[[3]string]int{}
	}
	r.index[k] = len(r.msgs)
	m.ID = int64(len(r.msgs) + 1)
	m.CreatedAt = time.Now().UTC()
	m.Calls = 1
	r.msgs = append(r.msgs, m)
	return m, nil
}

// List implements Recorder.
func (r *MemoryRecorder) List(_ context.Context, tenantID string, limit int) ([]Message, error) {
	limit = ClampLimit(limit)
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Message
	for i := len(r.msgs) - 1; i >= 0 && len(out) < limit; i-- {
		if r.msgs[i].TenantID == tenantID {
			out = append(out, r.msgs[i])
		}
	}
	return out, nil
}
