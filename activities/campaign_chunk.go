package activities

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"golang.org/x/sync/errgroup"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/metrics"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/webhooks"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/breaker"
)

// Chunked guarded sends: a campaign batch's provider sends that cannot share a
// call (SMS, push, email whose content is each recipient's own) are made one
// call per recipient, as DeliverEmail, DeliverSMS and DeliverPush make them,
// behind the same guard as guardedSend, step for step, with the guard's reads
// and writes made for a chunk of recipients of one channel at once:
//
//  1. one statement reads the chunk's receipts; a recipient the provider already
//     accepted (an earlier run whose record was lost) is recorded and skipped;
//  2. one statement records the rest "sending" through the provider (counting
//     the attempt); a recipient whose record has moved past "sending" meanwhile
//     (recorded sent, or decided otherwise, by another run) is skipped;
//  3. the provider account's rate is taken (Limiter.WaitN, a second's worth at
//     a time), then the calls are made, CampaignChunkConcurrency at once;
//  4. each accepted recipient is recorded "sent" with its provider message id
//     only after the provider accepted it: the accepts of a few milliseconds
//     share one statement (sentRecorder, group commit), so a worker that dies
//     leaves no more recipients accepted but unrecorded than the single path's
//     concurrent calls would;
//  5. one statement appends the chunk's attempts to the history, one queues its
//     webhook events; the failures' errors are recorded in one statement and
//     each failure goes through failed (permanent → failed; no device →
//     suppressed; retryable → retried later or dead-lettered).
//
// Failover is guardedSend's: the chunk starts with the provider the batch
// activity's attempt picks (FailoverAfter attempts each), and a recipient
// whose call found the provider's circuit open is sent again through the next
// provider of the chain at once (steps 2 to 5), as guardedSend moves on.
//
// Push: a recipient is one call per registered device, as DeliverPush makes
// them (tokens read for the whole chunk in one statement); the recipient is
// accepted when every device was accepted or found dead. What a retry of a
// partly accepted recipient does is the single path's in a campaign: every
// device again (a batch activity's heartbeat details cannot remember one
// recipient's devices), so push is no worse on this path.

// CampaignChunk is how many recipients of one channel share the guard's
// statements in a chunk of single calls.
const CampaignChunk = 500

// CampaignChunkConcurrency bounds a chunk's provider calls at once; an
// account's rate, when it has one, is the real bound.
const CampaignChunkConcurrency = 32

// sentFlushEvery is the longest a chunk's accepted recipients wait, besides
// the statement itself, before their "sent" record is written.
const sentFlushEvery = 5 * time.Millisecond

// sendChunked sends one channel's sends in chunks of single calls behind the
// guard and returns those left for the single path (no provider chain could
// be read: it reports that per recipient).
func (b *campaignBatch) sendChunked(ctx context.Context, ch herald.Channel, sends []providerSend) ([]providerSend, error) {
	if len(sends) == 0 {
		return nil, nil
	}
	chain, err := b.a.Senders.Chain(ctx, b.c.TenantID, ch)
	if err != nil {
		// The single path looks the chain up again and reports the failure per
		// recipient (guardedSend's chainError).
		chain = nil
	}
	if len(chain) == 0 {
		return sends, nil
	}
	idx := min((int(activity.GetInfo(ctx).Attempt)-1)/FailoverAfter, len(chain)-1)
	for len(sends) > 0 {
		n := min(len(sends), CampaignChunk)
		if err := b.sendChunk(ctx, ch, chain, idx, sends[:n]); err != nil {
			return nil, err
		}
		sends = sends[n:]
		activity.RecordHeartbeat(ctx)
	}
	return nil, nil
}

// chunkFailure is a failed call of a chunk: the provider's error and the
// activity error it is (providerFailure).
type chunkFailure struct {
	s       providerSend
	sendErr error
	err     error
}

// sendChunk sends one chunk through chain[idx] on, as the package comment says.
func (b *campaignBatch) sendChunk(ctx context.Context, ch herald.Channel, chain []providers.Sender, idx int, chunk []providerSend) error {
	if activity.GetInfo(ctx).Attempt > 1 {
		for range chunk {
			b.a.Metrics.Retry(ch)
		}
	}
	todo, err := b.skipAccepted(ctx, ch, chunk)
	if err != nil {
		return err
	}
	for len(todo) > 0 {
		sender := chain[idx]
		if todo, err = b.markSending(ctx, ch, sender.Provider, todo); err != nil {
			return err
		}
		failures, err := b.callChunk(ctx, ch, sender, todo)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		var next []providerSend
		for _, f := range failures {
			if breaker.IsOpen(f.sendErr) && idx+1 < len(chain) {
				next = append(next, f.s)
				continue
			}
			if err := b.failed(ctx, f.s, f.err); err != nil {
				return err
			}
		}
		todo, idx = next, idx+1
	}
	return nil
}

// callChunk makes the chunk's provider calls through sender after its rate,
// records the accepted ones sent as they come (sentRecorder), then the
// attempts, the webhook events and the failures' errors, and returns the
// failures. An error is one the chunk cannot go on after (the "sent" records
// could not be written, the rate limiter failed, the context ended).
func (b *campaignBatch) callChunk(ctx context.Context, ch herald.Channel, sender providers.Sender, todo []providerSend) ([]chunkFailure, error) {
	if len(todo) == 0 {
		return nil, nil
	}
	var tokens map[string][]providers.PushToken
	var tokensErr error
	if ch == herald.ChannelPush && sender.Push != nil {
		users := make([]string, len(todo))
		for i, s := range todo {
			users[i] = s.w.member.UserID
		}
		// A failed read is each recipient's failed send, as DeliverPush's.
		tokens, tokensErr = b.a.Providers.PushTokensOf(ctx, b.c.TenantID, users)
	}
	rec := b.startSentRecorder(ctx, ch, sender.Provider)
	var mu sync.Mutex
	var failures []chunkFailure
	var g errgroup.Group
	g.SetLimit(CampaignChunkConcurrency)
	var waitErr error
	for i := 0; i < len(todo); {
		n := len(todo) - i
		if sender.RatePerSecond > 0 && b.a.Limiter != nil {
			// A second's worth at a time: the account's rate holds across every
			// worker (the bucket is in PostgreSQL), one statement per take.
			n = min(n, max(1, int(sender.RatePerSecond)))
			if waitErr = b.a.Limiter.WaitN(ctx, "provider:"+sender.Account, sender.RatePerSecond, 1, n); waitErr != nil {
				break
			}
		}
		for _, s := range todo[i : i+n] {
			g.Go(func() error {
				started := time.Now()
				res, sendErr := b.call(ctx, ch, sender, s, tokens, tokensErr)
				took := time.Since(started)
				if sendErr == nil {
					b.a.Metrics.ProviderCall(b.c.TenantID, ch, sender.Provider, metrics.OutcomeSent, took)
					rec.add(s, res.ProviderMessageID)
					return nil
				}
				err := providerFailure(sendErr)
				b.a.Metrics.ProviderCall(b.c.TenantID, ch, sender.Provider, failureOutcome(err), took)
				mu.Lock()
				defer mu.Unlock()
				failures = append(failures, chunkFailure{s: s, sendErr: sendErr, err: err})
				return nil
			})
		}
		i += n
	}
	_ = g.Wait() // the calls return no errors: failures are collected
	sent, err := rec.close()
	if err != nil {
		return nil, err
	}
	if waitErr != nil {
		// The recipients not called stay "sending": a re-run finds them in doubt
		// and waits for a receipt before it calls (as guardedSend's limiter
		// failure leaves its recipient).
		return nil, waitErr
	}
	b.mu.Lock()
	b.res.Delivered += len(sent)
	b.mu.Unlock()
	as := make([]store.RecipientAttempt, 0, len(failures))
	for _, u := range sent {
		if u.Accepted {
			continue // the "sent" record carries the accepted attempt
		}
		as = append(as, store.RecipientAttempt{NotificationID: u.NotificationID,
			Attempt: store.Attempt{Provider: sender.Provider, Outcome: store.AttemptAccepted}})
	}
	for _, f := range failures {
		msg := errorText(f.err.Error())
		at := store.Attempt{Provider: sender.Provider, Outcome: store.AttemptRetryable, Error: &msg}
		if contract.IsNonRetryable(f.err) {
			at.Outcome = store.AttemptPermanent
		}
		as = append(as, store.RecipientAttempt{NotificationID: f.s.w.id, Attempt: at})
	}
	b.recordAttempts(ctx, ch, as)
	b.emitSent(ctx, sent)
	b.recordFailures(ctx, ch, failures)
	return failures, nil
}

// call is one recipient's provider call (or calls: push, one per device),
// the same as DeliverEmail's, DeliverSMS's and DeliverPush's.
func (b *campaignBatch) call(ctx context.Context, ch herald.Channel, sender providers.Sender, s providerSend,
	tokens map[string][]providers.PushToken, tokensErr error) (providers.Result, error) {
	tags := providers.Tags{TenantID: b.c.TenantID, NotificationID: s.w.id, Channel: ch}
	p := s.payload
	switch {
	case p.Email != nil:
		return sendEmail(ctx, sender, *p.Email, tags)
	case p.SMS != nil:
		return sendSMS(ctx, sender, *p.SMS, tags)
	case p.Push != nil:
		if sender.Push != nil && tokensErr != nil {
			return providers.Result{}, tokensErr
		}
		return b.a.sendPush(ctx, sender, *p.Push, tags, tokens[p.Push.UserID], map[string]string{}, nil)
	}
	return providers.Result{}, fmt.Errorf("campaign send of %s has no payload", ch)
}

// skipAccepted records the recipients whose receipt says the provider accepted
// in an earlier run whose record was lost (guardedSend's step 2), and returns
// the others.
func (b *campaignBatch) skipAccepted(ctx context.Context, ch herald.Channel, chunk []providerSend) ([]providerSend, error) {
	receipts, err := b.a.Providers.LatestReceipts(ctx, b.c.TenantID, sendIDs(chunk), ch)
	if err != nil {
		return nil, fmt.Errorf("read receipts: %w", err)
	}
	if len(receipts) == 0 {
		return chunk, nil
	}
	var todo []providerSend
	var known []store.BulkDeliveryUpdate
	for _, s := range chunk {
		r, ok := receipts[s.w.id]
		if !ok {
			todo = append(todo, s)
			continue
		}
		status := r.DeliveryStatus()
		if status == herald.DeliveryFailed {
			status = herald.DeliverySent // it was accepted; the bounce is recorded by the webhook
		}
		known = append(known, store.BulkDeliveryUpdate{NotificationID: s.w.id, Channel: ch, Status: status,
			Provider: r.Provider, ProviderMessageID: r.ProviderMessageID})
		b.a.Metrics.Delivery(b.c.TenantID, ch, r.Provider, metrics.OutcomeDuplicate)
	}
	if err := b.writeSent(ctx, ch, known); err != nil {
		return nil, err
	}
	b.emitSent(ctx, known)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.res.Duplicates += len(known)
	return todo, nil
}

// markSending records the recipients "sending" through provider before the
// call, counting the attempt (guardedSend's step 3): a re-run that finds them
// so waits for a receipt instead of sending. It returns those it recorded; a
// recipient whose record is already further on (another run recorded it sent,
// or it was decided otherwise since this batch read it) is not sent again and
// counts as a duplicate.
func (b *campaignBatch) markSending(ctx context.Context, ch herald.Channel, provider string, todo []providerSend) ([]providerSend, error) {
	sending := make([]store.BulkDeliveryUpdate, len(todo))
	for i, s := range todo {
		sending[i] = store.BulkDeliveryUpdate{NotificationID: s.w.id, Channel: ch, Status: herald.DeliverySending,
			Provider: provider, Attempts: 1}
	}
	applied, err := b.a.Store.UpdateDeliveriesApplied(ctx, b.c.TenantID, sending)
	if err != nil {
		return nil, err
	}
	marked := make([]providerSend, 0, len(todo))
	for i, s := range todo {
		if applied[i] {
			marked = append(marked, s)
		}
	}
	if skipped := len(todo) - len(marked); skipped > 0 {
		b.mu.Lock()
		b.res.Duplicates += skipped
		b.mu.Unlock()
	}
	return marked, nil
}

// writeSent writes "sent" (or what a receipt says) records after the provider
// accepted, retrying in place as recordSent does: every failed write here
// widens the window in which a re-run would call the provider again. When an
// update records this run's accepted call (Accepted), it clears Accepted on
// each update that did not apply: the row does not carry that attempt, and
// the caller records it as a row (RecordAttempts).
func (b *campaignBatch) writeSent(ctx context.Context, ch herald.Channel, us []store.BulkDeliveryUpdate) error {
	if len(us) == 0 {
		return nil
	}
	accepted := slices.ContainsFunc(us, func(u store.BulkDeliveryUpdate) bool { return u.Accepted })
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
		}
		if !accepted {
			err = b.a.Store.UpdateDeliveries(context.WithoutCancel(ctx), b.c.TenantID, us)
		} else {
			var applied []bool
			if applied, err = b.a.Store.UpdateDeliveriesApplied(context.WithoutCancel(ctx), b.c.TenantID, us); err == nil {
				for i := range us {
					us[i].Accepted = us[i].Accepted && applied[i]
				}
			}
		}
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("record %d %s sends as sent after the provider accepted: %w", len(us), ch, err)
}

// recordAttempts appends a chunk's attempts to the recipients' histories (best
// effort, as recordAttempt).
func (b *campaignBatch) recordAttempts(ctx context.Context, ch herald.Channel, as []store.RecipientAttempt) {
	if len(as) == 0 {
		return
	}
	b.acceptedAtOnce.Do(func() {
		// Unknown (zero) after a failed read: RecordAttempts then looks in
		// every partition.
		b.acceptedAt, _ = b.a.Store.CampaignAcceptedAt(context.WithoutCancel(ctx), b.c.TenantID, b.c.CampaignID)
	})
	if err := b.a.Store.RecordAttempts(context.WithoutCancel(ctx), b.c.TenantID, ch, b.acceptedAt, as); err != nil {
		activity.GetLogger(ctx).Warn("recording the attempts failed", "channel", ch, "recipients", len(as), "error", err)
	}
}

// recordFailures records the failed calls' errors on their channels, which
// stay "sending" until failed decides (as sendFailed does for one).
func (b *campaignBatch) recordFailures(ctx context.Context, ch herald.Channel, fs []chunkFailure) {
	us := make([]store.BulkDeliveryUpdate, len(fs))
	for i, f := range fs {
		us[i] = store.BulkDeliveryUpdate{NotificationID: f.s.w.id, Channel: ch, Status: herald.DeliverySending,
			LastError: errorText(f.sendErr.Error())}
	}
	if err := b.a.Store.UpdateDeliveries(ctx, b.c.TenantID, us); err != nil {
		activity.GetLogger(ctx).Warn("recording the send errors failed", "channel", ch, "recipients", len(us), "error", err)
	}
}

// emitSent queues the "sent" webhook events of recorded sends, in bulk (best
// effort, as emit).
func (b *campaignBatch) emitSent(ctx context.Context, us []store.BulkDeliveryUpdate) {
	if len(us) == 0 || b.a.Webhooks == nil {
		return
	}
	evs := make([]webhooks.Event, len(us))
	for i, u := range us {
		evs[i] = webhooks.Event{TenantID: b.c.TenantID, NotificationID: u.NotificationID, Channel: u.Channel,
			Status: herald.DeliverySent, Provider: u.Provider}
	}
	if err := b.a.Webhooks.EmitMany(context.WithoutCancel(ctx), evs); err != nil {
		activity.GetLogger(ctx).Warn("queueing the webhook events failed", "recipients", len(evs), "error", err)
	}
}

// sentRecorder writes a chunk's "sent" records as the provider accepts: a
// goroutine writes whatever was accepted since its last write, at most every
// sentFlushEvery, in one statement (group commit).
type sentRecorder struct {
	b        *campaignBatch
	ctx      context.Context
	ch       herald.Channel
	provider string

	wake, stop, finished chan struct{}

	mu      sync.Mutex
	pending []store.BulkDeliveryUpdate
	written []store.BulkDeliveryUpdate
	err     error
}

func (b *campaignBatch) startSentRecorder(ctx context.Context, ch herald.Channel, provider string) *sentRecorder {
	r := &sentRecorder{b: b, ctx: ctx, ch: ch, provider: provider,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), finished: make(chan struct{})}
	go r.run()
	return r
}

// add queues the recipient's "sent" record after the provider accepted.
func (r *sentRecorder) add(s providerSend, messageID string) {
	r.mu.Lock()
	r.pending = append(r.pending, store.BulkDeliveryUpdate{NotificationID: s.w.id, Channel: r.ch, Status: herald.DeliverySent,
		Provider: r.provider, ProviderMessageID: messageID, Accepted: true})
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *sentRecorder) run() {
	defer close(r.finished)
	for {
		select {
		case <-r.wake:
		case <-r.stop:
			r.flush()
			return
		}
		r.flush()
		select {
		case <-time.After(sentFlushEvery):
		case <-r.stop:
			r.flush()
			return
		}
	}
}

// flush writes what is pending; after a failed write it writes nothing more
// (the chunk fails, and a re-run finds the rest in doubt).
func (r *sentRecorder) flush() {
	r.mu.Lock()
	us := r.pending
	r.pending = nil
	failed := r.err != nil
	r.mu.Unlock()
	if len(us) == 0 || failed {
		return
	}
	err := r.b.writeSent(r.ctx, r.ch, us)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.err = err
		return
	}
	r.written = append(r.written, us...)
}

// close writes the last records once every call has returned, and returns
// what was written, or the first failed write.
func (r *sentRecorder) close() ([]store.BulkDeliveryUpdate, error) {
	close(r.stop)
	<-r.finished
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.written, r.err
}
