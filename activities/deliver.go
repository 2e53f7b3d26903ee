package activities

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/metrics"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/webhooks"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/breaker"
)

// SenderResolver lists a tenant's providers for a channel in failover order.
type SenderResolver interface {
	Chain(ctx context.Context, tenantID string, channel herald.Channel) ([]providers.Sender, error)
}

// FailoverAfter is how many attempts a provider gets before the chain moves on.
const FailoverAfter = 2

// DeliverEmail sends the email behind the delivery guard.
func (a *Activities) DeliverEmail(ctx context.Context, in contract.DeliverEmailInput) (contract.DeliverResult, error) {
	tags := providers.Tags{TenantID: in.TenantID, NotificationID: in.NotificationID, Channel: herald.ChannelEmail}
	return a.guardedSend(ctx, tags, nil, func(ctx context.Context, s providers.Sender) (providers.Result, error) {
		return sendEmail(ctx, s, in, tags)
	})
}

// sendEmail is an email's provider call (DeliverEmail's, and a campaign
// chunk's for an email that cannot go in a batch).
func sendEmail(ctx context.Context, s providers.Sender, in contract.DeliverEmailInput, tags providers.Tags) (providers.Result, error) {
	if s.Email == nil {
		return providers.Result{}, fmt.Errorf("provider %s cannot send email", s.Provider)
	}
	var cats []string
	if in.Category != "" {
		cats = []string{in.Category}
	}
	return s.Email.SendEmail(ctx, providers.EmailMessage{To: in.To, Subject: in.Subject, HTML: in.HTML, Text: in.Text,
		Headers: in.Headers, Categories: cats}, tags.IdempotencyKey(), tags)
}

// DeliverSMS sends the SMS behind the delivery guard.
func (a *Activities) DeliverSMS(ctx context.Context, in contract.DeliverSMSInput) (contract.DeliverResult, error) {
	tags := providers.Tags{TenantID: in.TenantID, NotificationID: in.NotificationID, Channel: herald.ChannelSMS}
	return a.guardedSend(ctx, tags, nil, func(ctx context.Context, s providers.Sender) (providers.Result, error) {
		return sendSMS(ctx, s, in, tags)
	})
}

// sendSMS is an SMS's provider call (DeliverSMS's and a campaign chunk's).
func sendSMS(ctx context.Context, s providers.Sender, in contract.DeliverSMSInput, tags providers.Tags) (providers.Result, error) {
	if s.SMS == nil {
		return providers.Result{}, fmt.Errorf("provider %s cannot send SMS", s.Provider)
	}
	return s.SMS.SendSMS(ctx, providers.SMSMessage{To: in.To, Body: in.Body}, tags.IdempotencyKey(), tags)
}

// DeliverPush sends to every device token of the user behind the delivery guard.
// Tokens already accepted in an earlier attempt are kept in the activity's heartbeat
// details, so a retry sends only to the rest; a token the provider says is dead is
// removed from the user. The channel counts as sent once any device accepted.
func (a *Activities) DeliverPush(ctx context.Context, in contract.DeliverPushInput) (contract.DeliverResult, error) {
	tags := providers.Tags{TenantID: in.TenantID, NotificationID: in.NotificationID, Channel: herald.ChannelPush}
	hb := &progress{}
	return a.guardedSend(ctx, tags, hb, func(ctx context.Context, s providers.Sender) (providers.Result, error) {
		if s.Push == nil {
			return providers.Result{}, fmt.Errorf("provider %s cannot send push", s.Provider)
		}
		tokens, err := a.Providers.PushTokens(ctx, in.TenantID, in.UserID)
		if err != nil {
			return providers.Result{}, err
		}
		done := map[string]string{} // token → provider message id
		if len(tokens) > 0 && activity.HasHeartbeatDetails(ctx) {
			if err := activity.GetHeartbeatDetails(ctx, &done); err != nil || done == nil {
				done = map[string]string{}
			}
		}
		hb.set(done)
		return a.sendPush(ctx, s, in, tags, tokens, done, func(done map[string]string) {
			hb.set(done)
			activity.RecordHeartbeat(ctx, hb.get())
		})
	})
}

// sendPush is a push's provider calls, one per device token of the user
// (DeliverPush's, and a campaign chunk's with the tokens it read for the whole
// chunk): tokens in done (token → provider message id) were accepted before
// and are skipped; accepted, when not nil, is told done after each new accept.
// A dead token is removed from the user. It succeeds when every token was
// accepted or found dead and at least one accepted; every token dead is a
// permanent failure; otherwise the last error (retryable) stands.
func (a *Activities) sendPush(ctx context.Context, s providers.Sender, in contract.DeliverPushInput, tags providers.Tags,
	tokens []providers.PushToken, done map[string]string, accepted func(map[string]string)) (providers.Result, error) {
	if s.Push == nil {
		return providers.Result{}, fmt.Errorf("provider %s cannot send push", s.Provider)
	}
	if len(tokens) == 0 {
		return providers.Result{}, contract.NoDevice.New("the user has no registered device", nil)
	}
	var firstID string
	var lastErr error
	dead := 0
	for _, t := range tokens {
		if id, ok := done[t.Token]; ok {
			firstID = orFirst(firstID, id)
			continue
		}
		res, err := s.Push.SendPush(ctx, providers.PushMessage{Token: t.Token, Title: in.Title, Body: in.Body, Data: in.Data},
			tags.IdempotencyKey(), tags)
		switch {
		case providers.IsDeadToken(err):
			if _, rerr := a.Providers.RemoveDeadPushToken(ctx, in.TenantID, t.Token); rerr != nil {
				return providers.Result{}, rerr
			}
			activity.GetLogger(ctx).Info("removed dead push token", "user", in.UserID)
			dead++
			lastErr = err
		case err != nil:
			lastErr = err
		default:
			done[t.Token] = res.ProviderMessageID
			firstID = orFirst(firstID, res.ProviderMessageID)
			if accepted != nil {
				accepted(done)
			}
		}
	}
	switch {
	case len(done) > 0 && len(done)+dead == len(tokens):
		return providers.Result{ProviderMessageID: firstID}, nil
	case dead == len(tokens):
		return providers.Result{}, contract.ProviderPermanent.New(
			"every registered device token was rejected as unregistered; they were removed", lastErr)
	default:
		// Some devices are still to be reached: retry them (the others are remembered).
		return providers.Result{}, lastErr
	}
}

func orFirst(cur, id string) string {
	if cur == "" {
		return id
	}
	return cur
}

// guardedSend is the Layer-2 delivery guard for one (notification, channel):
//  1. if the durable record says sent (or delivered), return without calling the provider;
//  2. if a provider receipt already names this notification, the provider accepted in an
//     earlier attempt whose record was lost: record it and return;
//  3. call the provider with the provider-side key "notification_id:channel";
//  4. record sent + provider message id only after the provider accepted.
//
// The residual window is a crash between 3 and 4 with no receipt yet: the retry calls
// the provider again. Providers without idempotency keys (all three) may then send twice.
func (a *Activities) guardedSend(ctx context.Context, tags providers.Tags, hb *progress, send func(context.Context, providers.Sender) (providers.Result, error)) (contract.DeliverResult, error) {
	if activity.GetInfo(ctx).Attempt > 1 {
		a.Metrics.Retry(tags.Channel)
	}
	d, err := a.Store.GetDelivery(ctx, tags.TenantID, tags.NotificationID, tags.Channel)
	if err != nil {
		return contract.DeliverResult{}, fmt.Errorf("read delivery guard: %w", err)
	}
	if d.Status == herald.DeliverySent || d.Status == herald.DeliveryDelivered {
		a.Metrics.Delivery(tags.TenantID, tags.Channel, deref(d.Provider), metrics.OutcomeDuplicate)
		// Again, in case the attempt that recorded it stopped before queueing it
		// (a repeat queues nothing).
		a.emit(ctx, webhooks.Event{TenantID: tags.TenantID, NotificationID: tags.NotificationID, Channel: tags.Channel,
			Status: herald.DeliverySent, Provider: deref(d.Provider)})
		return contract.DeliverResult{Status: d.Status, Duplicate: true}, nil
	}
	if r, ok, err := a.Providers.LatestReceipt(ctx, tags.TenantID, tags.NotificationID, tags.Channel); err != nil {
		return contract.DeliverResult{}, fmt.Errorf("read receipts: %w", err)
	} else if ok {
		status := r.DeliveryStatus()
		if status == herald.DeliveryFailed {
			status = herald.DeliverySent // it was accepted; the bounce is recorded by the webhook
		}
		if _, err := a.recordSent(ctx, tags, r.Provider, r.ProviderMessageID, status, 0); err != nil {
			return contract.DeliverResult{}, err
		}
		a.Metrics.Delivery(tags.TenantID, tags.Channel, r.Provider, metrics.OutcomeDuplicate)
		a.emit(ctx, webhooks.Event{TenantID: tags.TenantID, NotificationID: tags.NotificationID, Channel: tags.Channel,
			Status: herald.DeliverySent, Provider: r.Provider})
		return contract.DeliverResult{Status: status, Duplicate: true}, nil
	}
	if err := a.recipientPresent(ctx, tags.TenantID, tags.NotificationID); err != nil {
		return contract.DeliverResult{}, err
	}

	chain, err := a.Senders.Chain(ctx, tags.TenantID, tags.Channel)
	if err != nil {
		return contract.DeliverResult{}, chainError(err)
	}
	// Failover: each provider gets FailoverAfter attempts, then the next one takes
	// over. A provider whose circuit is open is skipped at once. The guard above
	// runs first on every attempt, so a fallback only ever fires while no provider
	// has been recorded (or reported by a receipt) as having accepted.
	idx := min((int(activity.GetInfo(ctx).Attempt)-1)/FailoverAfter, len(chain)-1)
	for {
		sender := chain[idx]
		provider := sender.Provider
		if _, err := a.Store.UpdateDelivery(ctx, tags.TenantID, tags.NotificationID, tags.Channel, store.DeliveryUpdate{
			Status: herald.DeliverySending, Provider: &provider, CountAttempt: true,
		}); err != nil {
			return contract.DeliverResult{}, err
		}
		stop := keepHeartbeating(ctx, hb)
		if sender.RatePerSecond > 0 && a.Limiter != nil {
			// The account's send rate holds across every worker: the bucket is in PostgreSQL.
			if err := a.Limiter.Wait(ctx, "provider:"+sender.Account, sender.RatePerSecond, 1); err != nil {
				stop()
				return contract.DeliverResult{}, err
			}
		}
		started := time.Now()
		res, sendErr := send(ctx, sender)
		took := time.Since(started)
		stop()
		if sendErr != nil {
			err := a.sendFailed(ctx, tags, sendErr)
			a.Metrics.ProviderCall(tags.TenantID, tags.Channel, provider, failureOutcome(err), took)
			a.recordAttempt(ctx, tags, provider, err)
			if breaker.IsOpen(sendErr) && idx+1 < len(chain) {
				idx++
				continue
			}
			return contract.DeliverResult{}, err
		}
		a.Metrics.ProviderCall(tags.TenantID, tags.Channel, provider, metrics.OutcomeSent, took)
		// The "sent" record carries the accepted attempt (the history reads
		// it from the delivery row): written in the same statement, it is in
		// the history exactly when the guard says sent.
		carried, err := a.recordSent(ctx, tags, provider, res.ProviderMessageID, herald.DeliverySent, int(activity.GetInfo(ctx).Attempt))
		if err != nil {
			return contract.DeliverResult{}, err
		}
		if !carried {
			a.recordAttempt(ctx, tags, provider, nil)
		}
		a.emit(ctx, webhooks.Event{TenantID: tags.TenantID, NotificationID: tags.NotificationID, Channel: tags.Channel,
			Status: herald.DeliverySent, Provider: provider})
		return contract.DeliverResult{Status: herald.DeliverySent}, nil
	}
}

// failureOutcome is a failed provider call's metrics outcome.
func failureOutcome(err error) string {
	if contract.IsNonRetryable(err) {
		return metrics.OutcomePermanent
	}
	return metrics.OutcomeRetryable
}

// recordAttempt appends the attempt to the channel's history (best effort: the
// history is for people; the guard record above is what delivery relies on).
func (a *Activities) recordAttempt(ctx context.Context, tags providers.Tags, provider string, err error) {
	at := store.Attempt{Attempt: int(activity.GetInfo(ctx).Attempt), Provider: provider, Outcome: store.AttemptAccepted}
	if err != nil {
		msg := errorText(err.Error())
		at.Error, at.Outcome = &msg, store.AttemptRetryable
		if contract.IsNonRetryable(err) {
			at.Outcome = store.AttemptPermanent
		}
	}
	if rerr := a.Store.RecordAttempt(context.WithoutCancel(ctx), tags.TenantID, tags.NotificationID, tags.Channel, at); rerr != nil {
		activity.GetLogger(ctx).Warn("recording the attempt failed", "error", rerr)
	}
}

// errorText is an error as stored for the tenant to see (history, last_error,
// dead letters): printable and bounded, whatever a provider answered.
func errorText(s string) string { return providers.SafeText(s, providers.MaxErrorTextBytes) }

// recordSent writes the guard record, retrying briefly in place: every failed write
// here widens the window in which a retry would call the provider again. With
// acceptedAttempt (not 0: this run's call was accepted, not a receipt's), the
// record carries it as the channel's accepted attempt; carried says whether
// it does (when not, the caller records the attempt as a row).
func (a *Activities) recordSent(ctx context.Context, tags providers.Tags, provider, messageID string, status herald.DeliveryStatus, acceptedAttempt int) (carried bool, err error) {
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return false, errors.Join(err, ctx.Err())
			case <-time.After(time.Duration(attempt*200) * time.Millisecond):
			}
		}
		var id *string
		if messageID != "" {
			id = &messageID
		}
		u := store.DeliveryUpdate{Status: status, Provider: &provider, ProviderMessageID: id}
		if acceptedAttempt > 0 {
			u.AcceptedAttempt = acceptedAttempt
			carried, err = a.Store.RecordAccepted(context.WithoutCancel(ctx), tags.TenantID, tags.NotificationID, tags.Channel, u)
		} else {
			_, err = a.Store.UpdateDelivery(context.WithoutCancel(ctx), tags.TenantID, tags.NotificationID, tags.Channel, u)
		}
		if err == nil {
			return carried, nil
		}
	}
	return false, fmt.Errorf("record %s as %s after the provider accepted: %w", tags.Channel, status, err)
}

// sendFailed records the attempt's error and turns it into the activity's error
// (see providerFailure).
func (a *Activities) sendFailed(ctx context.Context, tags providers.Tags, sendErr error) error {
	msg := errorText(sendErr.Error())
	if _, err := a.Store.UpdateDelivery(ctx, tags.TenantID, tags.NotificationID, tags.Channel, store.DeliveryUpdate{
		Status: herald.DeliverySending, LastError: &msg,
	}); err != nil {
		activity.GetLogger(ctx).Warn("recording the send error failed", "error", err)
	}
	return providerFailure(sendErr)
}

// providerFailure is a failed provider call's error as the activity returns
// it: permanent → non-retryable; throttled → retry no sooner than the provider
// asked; an application error or any other error as it is.
func providerFailure(sendErr error) error {
	if contract.IsApplicationError(sendErr) {
		return sendErr
	}
	pe, ok := providers.AsError(sendErr)
	if !ok {
		return sendErr
	}
	if pe.Permanent {
		return contract.ProviderPermanent.New(pe.Error(), sendErr)
	}
	return contract.ProviderUnavailable.NewRetryAfter(pe.Error(), sendErr, pe.RetryAfter)
}

// progress is what a multi-part send has done so far (push: the tokens already
// accepted), carried in every heartbeat so a retry can resume.
type progress struct {
	mu sync.Mutex
	v  map[string]string
}

func (p *progress) set(v map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.v = maps.Clone(v)
}

func (p *progress) get() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.v)
}

// keepHeartbeating heartbeats while a provider call runs, so a worker that dies
// mid-call is noticed within the heartbeat timeout (not the much longer
// start-to-close timeout) and the call is retried elsewhere. A heartbeat replaces
// the recorded details, so each one carries the current progress.
func keepHeartbeating(ctx context.Context, hb *progress) (stop func()) {
	timeout := activity.GetInfo(ctx).HeartbeatTimeout
	if timeout <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(timeout / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if hb != nil {
					activity.RecordHeartbeat(ctx, hb.get())
				} else {
					activity.RecordHeartbeat(ctx)
				}
			}
		}
	}()
	return func() { close(done) }
}
