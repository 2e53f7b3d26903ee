package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"golang.org/x/sync/errgroup"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/metrics"
	"github.com/herald-notify/herald/internal/preferences"
	"github.com/herald-notify/herald/internal/ratelimit"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/internal/webhooks"
	"github.com/herald-notify/herald/providers"
)

// CampaignSendConcurrency bounds the sends one batch makes at once through the
// single path (sendOne); chunks of single calls have CampaignChunkConcurrency.
const CampaignSendConcurrency = 16

// campaignCacheBytes bounds what one batch keeps of renders and merged data
// made from recipients' own data (a list line's columns), measured by the bytes
// of their strings: with distinct data per recipient the cache held every
// recipient's render of every channel for the whole batch (up to 512 KiB per
// render, contract.MaxRenderedBytes), hundreds of MB per batch on a worker
// running several. Content shared by recipients without data of their own is
// cached whatever its size (one entry per channel and locale).
const campaignCacheBytes = 4 << 20

// DefaultInDoubtWait is how long an in-doubt provider channel (see
// herald.ReasonInDoubt) waits for a receipt: SendGrid's "processed" event and
// Twilio's status callback come within seconds of the accept.
const DefaultInDoubtWait = 30 * time.Second

// CampaignStart counts the audience and holds it to the tenant's limits as the
// campaign was accepted: an audience over the operator's cap fails the campaign
// (CampaignAudience), and the whole audience is reserved on the day's quota, the
// one POST /v1/notifications counts against, all or nothing (CampaignQuota when
// it does not fit). The reservation is recorded with the campaign in the same
// transaction, so a retried start never reserves twice. Both errors are not
// retried: the workflow ends the campaign failed with the reason.
func (a *Activities) CampaignStart(ctx context.Context, c contract.CampaignSpec) (contract.CampaignStartResult, error) {
	known, unknown, err := a.Store.CountAudience(ctx, c.TenantID, c.AudienceKind, c.AudienceRef)
	if err != nil {
		return contract.CampaignStartResult{}, err
	}
	if err := a.Store.SetCampaignAudience(ctx, c.TenantID, c.CampaignID, known, unknown); err != nil {
		return contract.CampaignStartResult{}, err
	}
	res := contract.CampaignStartResult{AudienceSize: known, UnknownUsers: unknown}
	if c.MaxAudience > 0 && known > c.MaxAudience {
		return res, contract.CampaignAudience.New(fmt.Sprintf("the audience has %d users; the operator's cap on one campaign's audience is %d", known, c.MaxAudience), nil)
	}
	if c.DailyQuota <= 0 || known == 0 {
		return res, nil
	}
	now := time.Now()
	if known > int64(c.DailyQuota) {
		return res, quotaRefusal(known, c.DailyQuota, -1, now)
	}
	err = a.Store.InTx(ctx, func(tx *store.Store) error {
		marked, err := tx.MarkCampaignQuota(ctx, c.TenantID, c.CampaignID, now)
		if err != nil || !marked {
			return err
		}
		ok, used, _, err := ratelimit.New(tx.DB()).ReserveQuota(ctx, ratelimit.TenantDayQuotaKey(c.TenantID), c.DailyQuota, int(known), now)
		if err == nil && !ok {
			err = quotaRefusal(known, c.DailyQuota, used, now)
		}
		return err
	})
	return res, err
}

// quotaRefusal is the CampaignQuota error of an audience that does not fit the
// day's quota (used < 0: not read).
func quotaRefusal(audience int64, quota, used int, now time.Time) error {
	msg := fmt.Sprintf("the audience of %d users does not fit the daily quota of %d", audience, quota)
	if used >= 0 {
		msg += fmt.Sprintf(" (%d counted today)", used)
	}
	reset := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	return contract.CampaignQuota.New(msg+"; the quota resets at "+reset.Format(time.RFC3339), nil)
}

// CampaignPages returns the next page boundaries of the audience (keyset).
func (a *Activities) CampaignPages(ctx context.Context, in contract.CampaignPagesInput) ([]string, error) {
	c := in.Campaign
	return a.Store.AudienceBoundaries(ctx, store.AudienceBoundariesParams{
		TenantID: c.TenantID, Kind: c.AudienceKind, Ref: c.AudienceRef, After: in.After, PageSize: in.PageSize, Pages: in.Pages,
	})
}

// CampaignSetStatus records the campaign's status; cancelling also cancels the
// owed work (deferred and retrying channels), failing records why.
func (a *Activities) CampaignSetStatus(ctx context.Context, in contract.CampaignSetStatusInput) error {
	if in.Status == herald.CampaignFailed {
		if _, err := a.Store.FailCampaign(ctx, in.TenantID, in.CampaignID, in.Reason, in.Message); err != nil {
			return err
		}
		a.Metrics.CampaignFinished(in.Status)
		return nil
	}
	if in.Status == herald.CampaignCancelled {
		ids, err := a.Store.CancelPending(ctx, in.TenantID, in.CampaignID)
		if err != nil {
			return err
		}
		if err := a.Store.RecomputeNotificationStatuses(ctx, in.TenantID, ids); err != nil {
			return err
		}
	}
	if err := a.Store.SetCampaignStatus(ctx, in.TenantID, in.CampaignID, in.Status); err != nil {
		return err
	}
	if herald.CampaignFinal(in.Status) {
		a.Metrics.CampaignFinished(in.Status)
	}
	if in.Status == herald.CampaignCompleted {
		data := webhooks.CampaignData{CampaignID: in.CampaignID, Status: in.Status}
		if c, err := a.Store.GetCampaign(ctx, in.TenantID, in.CampaignID); err == nil && c.AudienceSize != nil {
			data.AudienceSize = *c.AudienceSize
		}
		a.emit(ctx, webhooks.Event{TenantID: in.TenantID, NotificationID: in.CampaignID, Type: herald.EventCampaignCompleted, Data: data})
	}
	return nil
}

// CampaignNextDue is when the campaign's earliest owed work is due.
func (a *Activities) CampaignNextDue(ctx context.Context, c contract.CampaignSpec) (contract.CampaignNextDueResult, error) {
	due, ok, err := a.Store.NextPendingDue(ctx, c.TenantID, c.CampaignID)
	return contract.CampaignNextDueResult{Any: ok, Due: due}, err
}

// CampaignBatch handles one page of the audience: every recipient's notification
// and delivery rows (the Layer-2 guard records) are written in bulk, preferences,
// caps and quiet hours are decided for the whole page before anything renders,
// each distinct content renders once, in-app messages go to the inbox in one
// statement and provider channels are sent behind the per-(notification,
// channel) guard. Re-running a batch (a retry, a worker killed mid-way) sends
// nothing twice: the guard rows say what was sent.
func (a *Activities) CampaignBatch(ctx context.Context, in contract.CampaignBatchInput) (contract.CampaignBatchResult, error) {
	// Heartbeats all along (a rate-limit wait, a slow provider), so a worker that
	// dies mid-batch is noticed within the heartbeat timeout.
	defer keepHeartbeating(ctx, nil)()
	c := in.Campaign
	members, err := a.Store.AudiencePage(ctx, store.AudiencePageParams{
		TenantID: c.TenantID, Kind: c.AudienceKind, Ref: c.AudienceRef, After: in.After, Through: in.Through, Limit: max(in.Limit, 1),
	})
	if err != nil {
		return contract.CampaignBatchResult{}, err
	}
	work := make([]recipientWork, len(members))
	for i, m := range members {
		work[i] = recipientWork{member: m, id: ids.CampaignNotificationID(c.TenantID, c.CampaignID, m.UserID), channels: c.Channels, attempt: 1}
	}
	b, err := a.openCampaignBatch(ctx, c, work)
	if err != nil {
		return contract.CampaignBatchResult{}, err
	}
	if err := b.insertNotifications(ctx); err != nil {
		return contract.CampaignBatchResult{}, err
	}
	res, err := b.deliver(ctx)
	if err == nil {
		a.Metrics.CampaignBatch(res.Recipients, res.Delivered, res.Suppressed, res.Deferred, res.Retrying, res.Failed, res.Duplicates)
	}
	return res, err
}

// CampaignPendingBatch handles up to Limit owed items that are due: deferred
// channels (re-evaluated with the preferences as they are now) and retries.
func (a *Activities) CampaignPendingBatch(ctx context.Context, in contract.CampaignPendingInput) (contract.CampaignPendingResult, error) {
	defer keepHeartbeating(ctx, nil)()
	c := in.Campaign
	items, err := a.Store.DuePending(ctx, c.TenantID, c.CampaignID, time.Now(), max(in.Limit, 1))
	if err != nil {
		return contract.CampaignPendingResult{}, err
	}
	if len(items) == 0 {
		return contract.CampaignPendingResult{}, nil
	}
	byUser, users := owedWork(items)
	members, err := a.Store.AudiencePage(ctx, store.AudiencePageParams{
		TenantID: c.TenantID, Kind: c.AudienceKind, Ref: c.AudienceRef, Only: users, Limit: len(users),
	})
	if err != nil {
		return contract.CampaignPendingResult{}, err
	}
	work, gone := inAudience(members, users, byUser)
	suppressed, err := a.suppressGone(ctx, c.TenantID, gone)
	if err != nil {
		return contract.CampaignPendingResult{}, err
	}
	b, err := a.openCampaignBatch(ctx, c, work)
	if err != nil {
		return contract.CampaignPendingResult{}, err
	}
	res, err := b.deliver(ctx)
	if err != nil {
		return contract.CampaignPendingResult{}, err
	}
	// The items handled go; the ones the batch moved (a new retry, a new
	// deferral) have a new due time and stay.
	if err := a.Store.DeletePending(ctx, c.TenantID, c.CampaignID, items); err != nil {
		return contract.CampaignPendingResult{}, err
	}
	res.Suppressed += suppressed
	return contract.CampaignPendingResult{CampaignBatchResult: res, More: len(items) == in.Limit}, nil
}

// owedWork groups due owed items by recipient, in the order the recipients
// first appear (each channel keeps its own attempt and in-doubt state).
func owedWork(items []store.PendingItem) (map[string]*recipientWork, []string) {
	byUser := map[string]*recipientWork{}
	var users []string
	for _, it := range items {
		w := byUser[it.UserID]
		if w == nil {
			w = &recipientWork{id: it.NotificationID, attempt: it.Attempt, attempts: map[herald.Channel]int{}, doubtOver: map[herald.Channel]bool{}}
			byUser[it.UserID] = w
			users = append(users, it.UserID)
		}
		w.channels = append(w.channels, it.Channel)
		w.attempts[it.Channel] = it.Attempt
		w.doubtOver[it.Channel] = it.Reason == herald.ReasonInDoubt
	}
	return byUser, users
}

// inAudience splits owed work into the recipients still in the audience (with
// their current profile) and those gone from it.
func inAudience(members []store.AudienceMember, users []string, byUser map[string]*recipientWork) (work []recipientWork, gone []*recipientWork) {
	found := map[string]bool{}
	for _, m := range members {
		w := byUser[m.UserID]
		w.member = m
		found[m.UserID] = true
		work = append(work, *w)
	}
	for _, u := range users {
		if !found[u] {
			gone = append(gone, byUser[u])
		}
	}
	return work, gone
}

// suppressGone ends the owed channels of recipients no longer in the audience
// (removed from the list or topic, or deleted) suppressed: they are not sent
// to. It returns how many channels it ended.
func (a *Activities) suppressGone(ctx context.Context, tenantID string, gone []*recipientWork) (int, error) {
	var updates []store.BulkDeliveryUpdate
	var ids []string
	for _, w := range gone {
		for _, ch := range w.channels {
			updates = append(updates, store.BulkDeliveryUpdate{NotificationID: w.id, Channel: ch, Status: herald.DeliverySuppressed, Reason: herald.ReasonNoAddress})
		}
		ids = append(ids, w.id)
	}
	if err := a.Store.UpdateDeliveries(ctx, tenantID, updates); err != nil {
		return 0, err
	}
	if err := a.Store.RecomputeNotificationStatuses(ctx, tenantID, ids); err != nil {
		return 0, err
	}
	return len(updates), nil
}

// recipientWork is one recipient's channels to handle in a batch.
type recipientWork struct {
	member   store.AudienceMember
	id       string
	channels []herald.Channel
	// attempt is the delivery round of every channel (attempts, when set, per channel).
	attempt  int
	attempts map[herald.Channel]int
	// doubtOver: channels whose in-doubt wait is over (the guard decides now).
	doubtOver map[herald.Channel]bool
}

func (w recipientWork) attemptOf(ch herald.Channel) int {
	if n, ok := w.attempts[ch]; ok {
		return n
	}
	return w.attempt
}

// campaignBatch is one batch of a campaign's recipients on its way through the
// phases of a bulk delivery. openCampaignBatch reads what every phase needs;
// insertNotifications writes the guard rows of recipients met for the first
// time; deliver then decides every channel (decide: triage, gate, plan),
// records the decisions, writes the inbox rows, sends the provider channels,
// records their outcomes and recomputes the notifications' statuses. Only the
// send phase runs concurrently; mu guards what it changes.
type campaignBatch struct {
	a    *Activities
	c    contract.CampaignSpec
	work []recipientWork
	// ids are the recipients' notification ids, in the order of work.
	ids  []string
	ts   store.TenantSettings
	tmpl templates.Template
	now  time.Time
	// data is the campaign's data (campaignData), each recipient's own merged
	// over it.
	data templates.Data
	// renders caches rendered content by channel + locale + data; cacheBytes
	// is what renders and merged hold of recipients' own data and content,
	// at most campaignCacheBytes.
	renders    map[string]renderOutcome
	cacheBytes int
	// ownKeys are the data keys some recipient of the batch has data of its
	// own for; skeletons the batch's email skeletons by resolved locale (nil:
	// not batchable), built with the campaign's data but those keys.
	ownKeys   map[string]bool
	skeletons map[string]*templates.EmailSkeleton
	// merged caches recipientData by the recipient's own data.
	merged map[string]mergedData
	// suppressed are the batch's recipient addresses on the suppression list.
	suppressed map[string]bool
	// inbox and sends are the deliveries decide planned.
	inbox []store.InboxBatchItem
	sends []providerSend

	mu     sync.Mutex
	res    contract.CampaignBatchResult
	update []store.BulkDeliveryUpdate
	owed   []store.PendingItem

	// acceptedAt is the recipients' rows' accepted_at (CampaignAcceptedAt),
	// read once, when attempts are first recorded: their partition.
	acceptedAtOnce sync.Once
	acceptedAt     time.Time
}

// mergedData is a recipient's merged data (recipientData).
type mergedData struct {
	data map[string]any
	err  error
}

type renderOutcome struct {
	r templates.Rendered
	// data is what r was rendered with: the campaign's data with the
	// recipient's own merged over it.
	data map[string]any
	err  error
}

// providerSend is one guarded provider delivery of a batch.
type providerSend struct {
	w       recipientWork
	channel herald.Channel
	payload contract.RedrivePayload
	// An email's render and the data it was rendered with (the email
	// skeleton's check), and, once grouped (batchKey), the skeleton it goes
	// out with and its substitutions.
	render templates.Rendered
	data   map[string]any
	skel   *templates.EmailSkeleton
	subs   map[string]string
}

// openCampaignBatch reads the tenant's settings and the campaign's template
// version for a batch of work. A batch without recipients reads nothing.
func (a *Activities) openCampaignBatch(ctx context.Context, c contract.CampaignSpec, work []recipientWork) (*campaignBatch, error) {
	b := &campaignBatch{a: a, c: c, work: work, now: time.Now(), renders: map[string]renderOutcome{}, ownKeys: map[string]bool{},
		skeletons: map[string]*templates.EmailSkeleton{}, merged: map[string]mergedData{}}
	b.res.Recipients = len(work)
	b.ids = make([]string, len(work))
	for i, w := range work {
		b.ids[i] = w.id
	}
	if len(work) == 0 {
		return b, nil
	}
	var err error
	if b.ts, err = a.Store.GetTenantSettings(ctx, c.TenantID); err != nil {
		return nil, err
	}
	if b.data, err = a.campaignData(ctx, c.TenantID, c.CampaignID); err != nil {
		return nil, err
	}
	rec, err := a.Store.GetTemplate(ctx, c.TenantID, c.TemplateID, c.TemplateVersion)
	if errors.Is(err, herald.ErrNotFound) {
		return nil, contract.RenderFailed.New("template "+c.TemplateID+" version is gone", err)
	}
	if err != nil {
		return nil, err
	}
	b.tmpl = rec.Template
	return b, nil
}

// insertNotifications writes every recipient's notification and delivery rows
// (the guard records decide reads) for recipients a batch meets for the first
// time; owed work finds them written.
func (b *campaignBatch) insertNotifications(ctx context.Context) error {
	if len(b.work) == 0 {
		return nil
	}
	users := make([]string, len(b.work))
	for i, w := range b.work {
		users[i] = w.member.UserID
	}
	c := b.c
	return b.a.Store.InsertCampaignNotifications(ctx, store.CampaignNotifications{
		TenantID: c.TenantID, CampaignID: c.CampaignID, WorkflowID: c.WorkflowID, TemplateID: c.TemplateID,
		TemplateVersion: c.TemplateVersion, Category: c.Category, Channels: c.Channels, AcceptedAt: b.now,
		NotificationIDs: b.ids, UserIDs: users,
	})
}

// deliver runs the batch's phases after its rows exist and returns what it did.
func (b *campaignBatch) deliver(ctx context.Context) (contract.CampaignBatchResult, error) {
	if len(b.work) == 0 {
		return b.res, nil
	}
	if err := b.decide(ctx); err != nil {
		return b.res, err
	}
	// Suppressions and deferrals are recorded before anything is sent.
	if err := b.flush(ctx); err != nil {
		return b.res, err
	}
	if err := b.deliverInbox(ctx); err != nil {
		return b.res, err
	}
	activity.RecordHeartbeat(ctx)
	if err := b.send(ctx, b.sends); err != nil {
		return b.res, err
	}
	if err := b.flush(ctx); err != nil {
		return b.res, err
	}
	return b.res, b.a.Store.RecomputeNotificationStatuses(ctx, b.c.TenantID, b.ids)
}

// decide reads the guard records and decides each recipient's channels:
// triage leaves the decided ones and holds the in-doubt ones, gate applies the
// recipient's preferences and cap, plan renders what goes out now.
func (b *campaignBatch) decide(ctx context.Context) error {
	guard, err := b.a.Store.DeliveryStatuses(ctx, b.c.TenantID, b.ids)
	if err != nil {
		return err
	}
	if b.suppressed, err = b.a.batchSuppressions(ctx, b.c.TenantID, b.work); err != nil {
		return err
	}
	activity.RecordHeartbeat(ctx)
	for _, w := range b.work {
		todo := b.triage(w, guard[w.id])
		if len(todo) == 0 {
			continue
		}
		deliver, err := b.gate(ctx, w, todo)
		if err != nil {
			return err
		}
		for _, ch := range deliver {
			b.plan(w, ch)
		}
	}
	return nil
}

// triage returns the recipient's channels still to decide, by their guard
// records: a channel already decided (by an earlier run of this batch) counts
// as a duplicate, one an earlier run left "sending" waits for its receipt.
func (b *campaignBatch) triage(w recipientWork, guard map[herald.Channel]store.GuardState) []herald.Channel {
	todo := make([]herald.Channel, 0, len(w.channels))
	for _, ch := range w.channels {
		g := guard[ch]
		switch {
		case g.Status == herald.DeliverySent || g.Status == herald.DeliveryDelivered || g.Status == herald.DeliverySuppressed ||
			g.Status == herald.DeliveryCancelled || g.Status == herald.DeliveryFailed:
			b.res.Duplicates++ // already decided, by an earlier run of this batch
		case g.Status == herald.DeliverySending && herald.IsProviderChannel(ch) && g.Reason != herald.ReasonRetrying && !w.doubtOver[ch]:
			// An earlier run marked it sending and never recorded the answer: the
			// provider may have accepted. Wait for the receipt window first.
			b.res.Retrying++
			b.owed = append(b.owed, store.PendingItem{UserID: w.member.UserID, Channel: ch, NotificationID: w.id,
				DueAt: b.now.Add(b.inDoubtWait()), Attempt: w.attemptOf(ch), Reason: herald.ReasonInDoubt})
		default:
			if g.Reason == herald.ReasonRetrying || g.Reason == herald.ReasonQuietHours {
				// Its wait is over: from here on "sending" means a send in flight.
				b.update = append(b.update, store.BulkDeliveryUpdate{NotificationID: w.id, Channel: ch, Status: g.Status, Reason: store.ClearReason})
			}
			todo = append(todo, ch)
		}
	}
	return todo
}

// inDoubtWait is how long an in-doubt channel waits for the provider's receipt.
func (b *campaignBatch) inDoubtWait() time.Duration {
	if b.c.InDoubtWait > 0 {
		return b.c.InDoubtWait
	}
	return DefaultInDoubtWait
}

// plan renders a channel the gate let through and queues its delivery (an
// inbox row or a provider send), built as a single notification's would be.
func (b *campaignBatch) plan(w recipientWork, ch herald.Channel) {
	out, ok := b.render(w, ch)
	if !ok {
		return
	}
	r := out.r
	to := contract.Addressee{TenantID: b.c.TenantID, NotificationID: w.id, UserID: w.member.UserID,
		Email: w.member.Email, Phone: w.member.Phone, Category: b.c.Category, AcceptedAt: b.now}
	d, err := contract.DeliveryPayload(to, ch, contract.RenderResult{Rendered: r, Headers: b.a.emailHeaders(ch, b.c.TenantID, w.member.UserID, b.tmpl)})
	switch {
	case errors.Is(err, contract.ErrNoAddress):
		// The gate suppresses a channel without an address first; kept for safety.
		b.finish(w.id, ch, herald.DeliverySuppressed, herald.ReasonNoAddress, "")
	case err != nil:
		b.finish(w.id, ch, herald.DeliveryFailed, herald.ReasonRenderFailed, "the template has no "+string(ch)+" content")
	case d.InApp != nil:
		in := d.InApp
		b.inbox = append(b.inbox, store.InboxBatchItem{UserID: in.UserID, NotificationID: in.NotificationID,
			Title: in.Title, Body: in.Body, ActionURL: in.ActionURL, Category: in.Category})
	default:
		s := providerSend{w: w, channel: ch, payload: d.Provider}
		if ch == herald.ChannelEmail {
			s.render, s.data = out.r, out.data
		}
		b.sends = append(b.sends, s)
	}
}

// deliverInbox writes the planned in-app messages in one statement; a message
// already in the inbox (an earlier run's) counts as a duplicate.
func (b *campaignBatch) deliverInbox(ctx context.Context) error {
	n, err := b.a.Store.DeliverToInboxBatch(ctx, b.c.TenantID, b.inbox, b.now)
	if err != nil {
		return err
	}
	b.res.Delivered += n
	b.res.Duplicates += len(b.inbox) - n
	return nil
}

// gate decides the recipient's channels with the single-notification rules
// (preferences.Evaluate, then the category cap, claimed once per notification)
// and returns those to deliver now; suppressions and deferrals are queued.
func (b *campaignBatch) gate(ctx context.Context, w recipientWork, channels []herald.Channel) ([]herald.Channel, error) {
	var user preferences.Preferences
	if len(w.member.Preferences) > 0 {
		if err := json.Unmarshal(w.member.Preferences, &user); err != nil {
			return nil, fmt.Errorf("preferences of %s: %w", w.member.UserID, err)
		}
	}
	decisions := preferences.Evaluate(preferences.EvalInput{
		Channels: channels, Category: b.c.Category, Critical: b.c.Critical, Prefs: preferences.Merge(b.ts.PreferenceDefaults, user),
		Addresses: map[herald.Channel]bool{
			herald.ChannelEmail: w.member.Email != "",
			herald.ChannelSMS:   w.member.Phone != "",
			herald.ChannelPush:  true, // tokens are read at send time; none → no_address then
		},
		Suppressed: suppressedChannels(b.suppressed, w.member.Email, w.member.Phone),
		Now:        b.now, UserTimezone: w.member.Timezone,
	})
	if err := b.claimCap(ctx, w, decisions); err != nil {
		return nil, err
	}
	var deliver []herald.Channel
	for _, d := range decisions {
		switch d.Action {
		case preferences.Suppress:
			b.finish(w.id, d.Channel, herald.DeliverySuppressed, d.Reason, "")
		case preferences.Defer:
			// Deferred to the window's end, not dropped: the campaign drains it then
			// (grouped: every recipient of one window ends at the same instant).
			b.res.Deferred++
			b.update = append(b.update, store.BulkDeliveryUpdate{NotificationID: w.id, Channel: d.Channel,
				Status: herald.DeliveryScheduled, Reason: herald.ReasonQuietHours})
			b.owed = append(b.owed, store.PendingItem{UserID: w.member.UserID, Channel: d.Channel, NotificationID: w.id,
				DueAt: d.DeferUntil, Attempt: w.attemptOf(d.Channel), Reason: herald.ReasonQuietHours})
		default:
			deliver = append(deliver, d.Channel)
		}
	}
	return deliver, nil
}

// claimCap counts the recipient's notification against the category cap, once,
// when a channel is still live (critical campaigns are exempt); over the cap,
// every live channel is suppressed cap_exceeded.
func (b *campaignBatch) claimCap(ctx context.Context, w recipientWork, decisions []preferences.Decision) error {
	live := 0
	for _, d := range decisions {
		if d.Action != preferences.Suppress {
			live++
		}
	}
	limit := b.ts.CategoryCaps[b.c.Category]
	if limit <= 0 || live == 0 || b.c.Critical {
		return nil
	}
	allowed, err := b.a.Store.ClaimCap(ctx, store.ClaimCapParams{
		TenantID: b.c.TenantID, UserID: w.member.UserID, Category: b.c.Category, NotificationID: w.id, Limit: limit, At: b.now,
	})
	if err != nil || allowed {
		return err
	}
	for i := range decisions {
		if decisions[i].Action != preferences.Suppress {
			decisions[i] = preferences.Decision{Channel: decisions[i].Channel, Action: preferences.Suppress, Reason: herald.ReasonCapExceeded}
		}
	}
	return nil
}

// render renders one channel for the recipient: the campaign's data with the
// recipient's own merged over it, in the recipient's locale. Recipients without
// data of their own share one rendering per locale.
func (b *campaignBatch) render(w recipientWork, ch herald.Channel) (renderOutcome, bool) {
	locale := templates.ResolveLocale(w.member.Locale, b.tmpl.AvailableLocales(), b.ts.DefaultLocale)
	key := string(ch) + "\x00" + locale + "\x00" + string(w.member.Data)
	out, ok := b.renders[key]
	if !ok {
		var data map[string]any
		data, out.err = b.recipientData(w.member.Data)
		out.data = data
		if out.err == nil {
			out.r, out.err = templates.Render(b.tmpl, ch, locale, data)
		}
		if out.err == nil {
			out.err = contract.CheckRendered(out.r)
		}
		// Content shared by recipients without data of their own is always
		// kept (channels × locales entries); a recipient's own only while the
		// batch's cache is under its byte budget: with distinct data per
		// recipient no entry is ever used again by another recipient.
		if len(w.member.Data) == 0 {
			b.renders[key] = out
		} else if size := len(key) + renderedBytes(out.r); b.cacheBytes+size <= campaignCacheBytes {
			b.renders[key] = out
			b.cacheBytes += size
		}
	}
	if out.err != nil {
		reason := herald.ReasonRenderFailed
		var big *contract.ContentTooLargeError
		if errors.As(out.err, &big) {
			reason = herald.ReasonContentTooLarge
		}
		b.finish(w.id, ch, herald.DeliveryFailed, reason, out.err.Error())
		return renderOutcome{}, false
	}
	return out, true
}

// renderedBytes is about what r holds: the bytes of its strings.
func renderedBytes(r templates.Rendered) int {
	n := len(r.TemplateID) + len(r.Locale)
	if e := r.Email; e != nil {
		n += len(e.Subject) + len(e.HTML) + len(e.Text)
	}
	if m := r.SMS; m != nil {
		n += len(m.Text)
	}
	if p := r.Push; p != nil {
		n += len(p.Title) + len(p.Body)
		for k, v := range p.Data {
			n += len(k) + len(v)
		}
	}
	if a := r.InApp; a != nil {
		n += len(a.Title) + len(a.Body) + len(a.ActionURL)
	}
	return n
}

// recipientData is the campaign's data with the recipient's own (raw, a list
// line's data) merged over it, merged once per distinct data however many
// channels render it.
func (b *campaignBatch) recipientData(raw []byte) (map[string]any, error) {
	if len(raw) == 0 {
		return b.data, nil
	}
	if m, ok := b.merged[string(raw)]; ok {
		return m.data, m.err
	}
	var own templates.Data
	err := json.Unmarshal(raw, &own)
	data := maps.Clone(map[string]any(b.data))
	if data == nil {
		data = map[string]any{}
	}
	maps.Copy(data, own)
	for k := range own {
		b.ownKeys[k] = true
	}
	// A merged map holds about the recipient's own data twice over (parsed,
	// and the key); kept while the batch's cache is under its byte budget.
	if size := 2 * len(raw); b.cacheBytes+size <= campaignCacheBytes {
		b.merged[string(raw)] = mergedData{data, err}
		b.cacheBytes += size
	}
	return data, err
}

// finish queues a channel's final outcome decided without a send.
func (b *campaignBatch) finish(id string, ch herald.Channel, status herald.DeliveryStatus, reason herald.Reason, msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch status {
	case herald.DeliverySuppressed:
		b.res.Suppressed++
	case herald.DeliveryFailed:
		b.res.Failed++
	}
	b.update = append(b.update, store.BulkDeliveryUpdate{NotificationID: id, Channel: ch, Status: status, Reason: reason, LastError: errorText(msg)})
}

// flush writes the queued delivery updates and owed work.
func (b *campaignBatch) flush(ctx context.Context) error {
	b.mu.Lock()
	us, owed := b.update, b.owed
	b.update, b.owed = nil, nil
	b.mu.Unlock()
	if err := b.a.Store.UpdateDeliveries(ctx, b.c.TenantID, us); err != nil {
		return err
	}
	return b.a.Store.PutPending(ctx, b.c.TenantID, b.c.CampaignID, owed)
}

// send makes the provider deliveries, each behind the same guard as a single
// notification's (guardedSend: receipts read first, the durable record before
// the call, "sent" recorded only after the provider accepted), the guard's
// reads and writes made in bulk. Each channel goes its own way, the channels at
// once: emails that can share content go in batch calls (sendEmailBatches),
// everything else in chunks of single calls made concurrently
// (sendChunked), and what neither can take (no provider chain to read) one by
// one, CampaignSendConcurrency at a time, through the single path (sendOne),
// which reports it per recipient. A retryable failure is owed again after the
// tenant's backoff; when its attempts are used up it is dead-lettered
// (redrivable) like a single notification's.
func (b *campaignBatch) send(ctx context.Context, sends []providerSend) error {
	if len(sends) == 0 {
		return nil
	}
	byChannel := map[herald.Channel][]providerSend{}
	var order []herald.Channel
	for _, s := range sends {
		if _, ok := byChannel[s.channel]; !ok {
			order = append(order, s.channel)
		}
		byChannel[s.channel] = append(byChannel[s.channel], s)
	}
	var mu sync.Mutex
	var single []providerSend
	g, gctx := errgroup.WithContext(ctx)
	for _, ch := range order {
		g.Go(func() error {
			rest := byChannel[ch]
			var err error
			if ch == herald.ChannelEmail {
				if rest, err = b.sendEmailBatches(gctx, rest); err != nil {
					return err
				}
			}
			if rest, err = b.sendChunked(gctx, ch, rest); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			single = append(single, rest...)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return b.sendSingly(ctx, single)
}

// sendSingly sends each through the single path, CampaignSendConcurrency at a
// time.
func (b *campaignBatch) sendSingly(ctx context.Context, sends []providerSend) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(CampaignSendConcurrency)
	for _, s := range sends {
		g.Go(func() error {
			res, err := b.a.sendOne(gctx, s.payload)
			switch {
			case err == nil:
				b.mu.Lock()
				defer b.mu.Unlock()
				if res.Duplicate {
					b.res.Duplicates++
				} else {
					b.res.Delivered++
				}
				return nil
			case gctx.Err() != nil:
				return gctx.Err()
			}
			return b.failed(gctx, s, err)
		})
	}
	return g.Wait()
}

// sendOne runs the channel's guarded send (the same code as DeliverEmail,
// DeliverSMS and DeliverPush).
func (a *Activities) sendOne(ctx context.Context, p contract.RedrivePayload) (contract.DeliverResult, error) {
	switch {
	case p.Email != nil:
		return a.DeliverEmail(ctx, *p.Email)
	case p.SMS != nil:
		return a.DeliverSMS(ctx, *p.SMS)
	default:
		return a.DeliverPush(ctx, *p.Push)
	}
}

// failed records a failed send: permanent → failed; no device → suppressed
// no_address; retryable → owed again after the backoff, or dead-lettered once
// the channel's retry policy has no attempt left.
func (b *campaignBatch) failed(ctx context.Context, s providerSend, err error) error {
	msg := contract.ErrorMessage(err)
	switch {
	case contract.NoDevice.Is(err):
		b.finish(s.w.id, s.channel, herald.DeliverySuppressed, herald.ReasonNoAddress, "")
		return nil
	case contract.IsNonRetryable(err):
		b.finish(s.w.id, s.channel, herald.DeliveryFailed, contract.FailureReason(err), msg)
		return nil
	}
	policy := b.retryPolicy(s.channel)
	attempt := s.w.attemptOf(s.channel)
	if attempt >= policy.MaximumAttempts {
		return b.deadLetter(ctx, s, attempt, msg)
	}
	// Due from the batch's start, so a batch's retries fall due together and
	// go out in one batch again.
	b.retryLater(s, attempt+1, b.now.Add(retryDelay(policy, attempt, err)), msg)
	return nil
}

// retryPolicy is the tenant's retry policy for the channel over
// herald.DefaultProviderRetry (the default alone when the tenant's is missing
// or invalid), as a single notification's send retries.
func (b *campaignBatch) retryPolicy(ch herald.Channel) herald.RetryPolicy {
	if o, ok := b.ts.RetryPolicies[ch]; ok && o.Validate() == nil {
		return o.Over(herald.DefaultProviderRetry)
	}
	return herald.DefaultProviderRetry
}

// retryDelay is the backoff after the attempt-th failed send: the policy's,
// or longer when the provider said when to come back.
func retryDelay(policy herald.RetryPolicy, attempt int, err error) time.Duration {
	delay := float64(policy.InitialInterval.Duration) * math.Pow(policy.BackoffCoefficient, float64(attempt-1))
	delay = min(delay, float64(policy.MaximumInterval.Duration))
	if pe, ok := providers.AsError(err); ok && pe.RetryAfter > time.Duration(delay) {
		delay = float64(pe.RetryAfter)
	}
	return time.Duration(delay)
}

// deadLetter dead-letters a send whose attempts are used up, with its payload,
// so it can be redriven like a single notification's.
func (b *campaignBatch) deadLetter(ctx context.Context, s providerSend, attempts int, msg string) error {
	raw, err := json.Marshal(s.payload)
	if err != nil {
		return err
	}
	if _, err := b.a.Store.PutDeadLetter(ctx, store.DeadLetter{TenantID: b.c.TenantID, NotificationID: s.w.id, Channel: s.channel,
		TemplateID: b.c.TemplateID, Attempts: attempts, LastError: errorText(msg), Payload: raw}); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.res.Failed++
	return nil
}

// retryLater owes the send again as the given attempt, due at due; until then
// the channel stays "sending" with reason retrying.
func (b *campaignBatch) retryLater(s providerSend, attempt int, due time.Time, msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.res.Retrying++
	b.update = append(b.update, store.BulkDeliveryUpdate{NotificationID: s.w.id, Channel: s.channel, Status: herald.DeliverySending,
		Reason: herald.ReasonRetrying, LastError: errorText(msg)})
	b.owed = append(b.owed, store.PendingItem{UserID: s.w.member.UserID, Channel: s.channel, NotificationID: s.w.id,
		DueAt: due, Attempt: attempt, Reason: herald.ReasonRetrying, LastError: errorText(msg)})
}

// emailBatchConcurrency bounds the batch calls one batch makes at once.
const emailBatchConcurrency = 4

// sendEmailBatches sends the emails that can go in batches: when the tenant's
// first email provider takes batches (SendGrid: 1,000 personalizations per mail
// send; the sandbox), recipients whose email comes from one skeleton with
// substitutions of their own (personalized content made of plain variables,
// see templates.EmailSkeleton), or else whose rendered email is the same, go
// in one call each. The guard holds per recipient, in bulk: recipients whose
// record or receipt says the provider already accepted are skipped (and
// recorded), the rest are recorded "sending", the call is made, and only after
// the provider accepted are they recorded "sent". It returns the emails left
// for single calls: those that share their content with no one (a template
// that is not batchable, rendered differently for each), and those of a call
// the provider refused for good (each then gets its own verdict).
func (b *campaignBatch) sendEmailBatches(ctx context.Context, sends []providerSend) ([]providerSend, error) {
	if len(sends) < 2 {
		return sends, nil
	}
	chain, err := b.a.Senders.Chain(ctx, b.c.TenantID, herald.ChannelEmail)
	if err != nil {
		// The single calls look the chain up again and report the failure per
		// recipient.
		chain = nil
	}
	if len(chain) == 0 || chain[0].Email == nil {
		return sends, nil
	}
	sender := chain[0]
	batcher, ok := sender.Email.(providers.BatchEmailSender)
	if !ok || batcher.MaxEmailBatch() < 2 {
		return sends, nil
	}
	groups := map[string][]providerSend{}
	var order []string
	for _, s := range sends {
		key := b.batchKey(&s)
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], s)
	}
	var rest []providerSend
	var calls [][]providerSend
	for _, key := range order {
		group := groups[key]
		if len(group) < 2 {
			rest = append(rest, group...)
			continue
		}
		for len(group) > 0 {
			n := min(len(group), batcher.MaxEmailBatch())
			calls, group = append(calls, group[:n]), group[n:]
		}
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(emailBatchConcurrency)
	for _, call := range calls {
		g.Go(func() error {
			left, err := b.sendEmailChunk(gctx, sender, batcher, call)
			if err != nil {
				return err
			}
			activity.RecordHeartbeat(gctx)
			mu.Lock()
			defer mu.Unlock()
			rest = append(rest, left...)
			return nil
		})
	}
	err = g.Wait()
	return rest, err
}

// batchKey is what the email shares with the others of its batch call: its
// skeleton, when the recipient's render is the skeleton of its locale with
// substitutions of its own (set on s), else its rendered content.
func (b *campaignBatch) batchKey(s *providerSend) string {
	if sk := b.skeleton(s.render.Locale); sk != nil {
		if subs, ok := sk.Substitutions(s.render, s.data); ok {
			s.skel, s.subs = sk, subs
			return "skeleton\x00" + sk.Key
		}
	}
	e := s.payload.Email
	sum := sha256.New()
	for _, part := range []string{e.Subject, e.HTML, e.Text} {
		fmt.Fprintf(sum, "%d:%s", len(part), part)
	}
	return "content\x00" + hex.EncodeToString(sum.Sum(nil))
}

// skeleton is the batch's email skeleton for the resolved locale, built once:
// the campaign's data is rendered into it but for the keys some recipient has
// data of its own for, which become tokens with every other variable. nil when
// the template is not batchable (or the skeleton cannot be rendered).
func (b *campaignBatch) skeleton(locale string) *templates.EmailSkeleton {
	if sk, ok := b.skeletons[locale]; ok {
		return sk
	}
	shared := map[string]any{}
	for k, v := range b.data {
		if !b.ownKeys[k] {
			shared[k] = v
		}
	}
	sk, err := templates.NewEmailSkeleton(b.tmpl, locale, shared)
	if err != nil {
		sk = nil
	}
	b.skeletons[locale] = sk
	return sk
}

// recordBatchAttempt appends the batch call's outcome to each recipient's email
// history (best effort, as recordAttempt: the history is for people; the guard
// records are what delivery relies on). A permanent refusal of the whole call is
// not a verdict on each recipient: each is then sent alone, and that attempt
// says what became of it.
func (b *campaignBatch) recordBatchAttempt(ctx context.Context, provider string, sends []providerSend, sendErr error) {
	at := store.Attempt{Provider: provider, Outcome: store.AttemptAccepted}
	if sendErr != nil {
		msg := errorText(sendErr.Error())
		at.Error, at.Outcome = &msg, store.AttemptRetryable
		if pe, ok := providers.AsError(sendErr); ok && pe.Permanent {
			at.Outcome = store.AttemptPermanent
		}
	}
	as := make([]store.RecipientAttempt, len(sends))
	for i, s := range sends {
		as[i] = store.RecipientAttempt{NotificationID: s.w.id, Attempt: at}
	}
	b.recordAttempts(ctx, herald.ChannelEmail, as)
}

// sendEmailChunk sends one batch call's worth of emails with equal content
// (or one skeleton) behind the guard, in bulk: recipients the provider already
// accepted are recorded and skipped, the rest are recorded "sending", the call
// is made, and only after the provider accepted are they recorded "sent". It
// returns the recipients left for single calls.
func (b *campaignBatch) sendEmailChunk(ctx context.Context, sender providers.Sender, batcher providers.BatchEmailSender, chunk []providerSend) ([]providerSend, error) {
	todo, err := b.skipAccepted(ctx, herald.ChannelEmail, chunk)
	if err != nil || len(todo) == 0 {
		return nil, err
	}
	if todo, err = b.markSending(ctx, herald.ChannelEmail, sender.Provider, todo); err != nil || len(todo) == 0 {
		return nil, err
	}
	if sender.RatePerSecond > 0 && b.a.Limiter != nil {
		if err := b.a.Limiter.WaitN(ctx, "provider:"+sender.Account, sender.RatePerSecond, 1, len(todo)); err != nil {
			return nil, err
		}
	}
	started := time.Now()
	res, sendErr := batcher.SendEmailBatch(ctx, batchMessage(todo[0]), b.batchRecipients(todo))
	took := time.Since(started)
	if sendErr != nil {
		b.a.Metrics.ProviderCall(b.c.TenantID, herald.ChannelEmail, sender.Provider, failureOutcome(providerFailure(sendErr)), took)
		b.recordBatchAttempt(ctx, sender.Provider, todo, sendErr)
		return b.batchFailed(ctx, todo, sendErr)
	}
	b.a.Metrics.ProviderCall(b.c.TenantID, herald.ChannelEmail, sender.Provider, metrics.OutcomeSent, took)
	sent := make([]store.BulkDeliveryUpdate, len(todo))
	for i, s := range todo {
		sent[i] = store.BulkDeliveryUpdate{NotificationID: s.w.id, Channel: herald.ChannelEmail, Status: herald.DeliverySent,
			Provider: sender.Provider, ProviderMessageID: res.ProviderMessageID, Accepted: true}
	}
	if err := b.writeSent(ctx, herald.ChannelEmail, sent); err != nil {
		return nil, err
	}
	// The "sent" records carry the accepted attempt; one that did not apply
	// gets its row.
	var uncarried []providerSend
	for i, s := range todo {
		if !sent[i].Accepted {
			uncarried = append(uncarried, s)
		}
	}
	if len(uncarried) > 0 {
		b.recordBatchAttempt(ctx, sender.Provider, uncarried, nil)
	}
	b.emitSent(ctx, sent)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.res.Delivered += len(todo)
	return nil, nil
}

// batchMessage is the content every recipient of a batch call shares: the
// skeleton's when the call's recipients have one (each gets its
// substitutions), else the first one's, which all have.
func batchMessage(s providerSend) providers.EmailMessage {
	e := s.payload.Email
	var cats []string
	if e.Category != "" {
		cats = []string{e.Category}
	}
	m := providers.EmailMessage{Subject: e.Subject, Text: e.Text, HTML: e.HTML, Categories: cats}
	if s.skel != nil {
		m.Subject, m.HTML, m.Text = s.skel.Subject, s.skel.HTML, s.skel.Text
	}
	return m
}

// batchRecipients are the batch call's recipients, each with its own headers,
// tags and substitutions.
func (b *campaignBatch) batchRecipients(todo []providerSend) []providers.BatchRecipient {
	to := make([]providers.BatchRecipient, len(todo))
	for i, s := range todo {
		e := s.payload.Email
		to[i] = providers.BatchRecipient{To: e.To, Headers: e.Headers, Substitutions: s.subs,
			Tags: providers.Tags{TenantID: b.c.TenantID, NotificationID: s.w.id, Channel: herald.ChannelEmail}}
	}
	return to
}

// batchFailed handles a failed batch call. One bad recipient refuses the whole
// call for good: each recipient is then sent alone (returned) and gets its own
// verdict. Any other failure is each recipient's failed send.
func (b *campaignBatch) batchFailed(ctx context.Context, todo []providerSend, sendErr error) ([]providerSend, error) {
	if pe, ok := providers.AsError(sendErr); ok && pe.Permanent {
		return todo, nil
	}
	fs := make([]chunkFailure, len(todo))
	for i, s := range todo {
		fs[i] = chunkFailure{s: s, sendErr: sendErr, err: providerFailure(sendErr)}
	}
	b.recordFailures(ctx, herald.ChannelEmail, fs)
	for _, f := range fs {
		if err := b.failed(ctx, f.s, f.err); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// sendIDs are the sends' notification ids.
func sendIDs(sends []providerSend) []string {
	ids := make([]string, len(sends))
	for i, s := range sends {
		ids[i] = s.w.id
	}
	return ids
}
