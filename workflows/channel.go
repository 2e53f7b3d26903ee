package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/preferences"
)

// One channel's story: preferences, quiet hours and caps decide first (so
// opted-out content is never produced, nor logged), then the channel renders, then
// it is delivered behind the (notification, channel) guard; each channel runs on
// its own, so one channel's retries or quiet-hours wait never delay another.

// gateAndDeliver decides every channel, claims the cap once for the notification
// and runs each surviving channel's flow concurrently.
func (w *notification) gateAndDeliver(ctx workflow.Context) error {
	prefs, err := w.loadPreferences(ctx)
	if contract.UnknownUser.Is(err) {
		w.endAll(ctx, err) // erased between loading the profile and the preferences
		return nil
	}
	if err != nil {
		return err
	}
	w.retry = validRetryPolicies(ctx, prefs.RetryPolicies)
	decisions := map[herald.Channel]preferences.Decision{}
	live := 0
	for _, d := range w.evaluate(ctx, prefs, w.in.Channels) {
		decisions[d.Channel] = d
		if d.Action != preferences.Suppress {
			live++
		}
	}

	// Caps count notifications, not channels: one claim per notification that still
	// has somewhere to go. Critical notifications bypass caps.
	if limit := prefs.CategoryCaps[w.in.Category]; limit > 0 && live > 0 && !w.in.Critical {
		var allowed bool
		if err := w.db(ctx, contract.ClaimCap, contract.ClaimCapInput{
			TenantID: w.in.TenantID, UserID: w.in.UserID, Category: w.in.Category,
			NotificationID: w.state.NotificationID, Limit: limit, At: w.state.AcceptedAt,
		}).Get(ctx, &allowed); err != nil {
			return err
		}
		if !allowed {
			for _, ch := range w.in.Channels {
				if d := decisions[ch]; d.Action != preferences.Suppress {
					decisions[ch] = preferences.Decision{Channel: ch, Action: preferences.Suppress, Reason: herald.ReasonCapExceeded}
				}
			}
		}
	}

	wg := workflow.NewWaitGroup(ctx)
	for _, ch := range w.in.Channels {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			w.channelFlow(ctx, ch, decisions[ch], prefs.DefaultLocale)
		})
	}
	wg.Wait(ctx)
	return nil
}

func (w *notification) loadPreferences(ctx workflow.Context) (contract.PreferencesResult, error) {
	var prefs contract.PreferencesResult
	err := w.db(ctx, contract.LoadPreferences, contract.LoadPreferencesInput{
		TenantID: w.in.TenantID, UserID: w.in.UserID, Email: w.recipient.Email, Phone: w.recipient.Phone,
	}).Get(ctx, &prefs)
	return prefs, err
}

// channelFlow waits out quiet hours (re-reading preferences when the wait ends, so a
// change made meanwhile is honoured), then renders and delivers the channel; an
// ordered channel takes its place in its lane first and waits for its turn
// right before the delivery (ordering.go).
func (w *notification) channelFlow(ctx workflow.Context, ch herald.Channel, d preferences.Decision, tenantLocale string) {
	if w.ordered(ch) {
		// The channel is due: its place in its order lane (ordering.go).
		if d.Action != preferences.Suppress {
			w.joinLane(ctx, ch)
		}
		defer w.leaveLane(ctx, ch)
	}
	for d.Action == preferences.Defer {
		w.schedule(ctx, ch, d.Reason)
		if err := workflow.Sleep(ctx, d.DeferUntil.Sub(workflow.Now(ctx))); err != nil {
			w.finishChannel(ctx, ch, herald.DeliveryCancelled, err, "")
			return
		}
		prefs, err := w.loadPreferences(ctx)
		if contract.UnknownUser.Is(err) {
			w.suppress(ctx, ch, herald.ReasonUserDeleted) // erased during the wait
			return
		}
		if err != nil {
			w.finishChannel(ctx, ch, herald.DeliveryFailed, err, "")
			return
		}
		d = w.evaluate(ctx, prefs, []herald.Channel{ch})[0]
	}
	if d.Action == preferences.Suppress {
		w.suppress(ctx, ch, d.Reason)
		return
	}

	var r contract.RenderResult
	if err := w.db(ctx, contract.Render, contract.RenderInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, UserID: w.in.UserID,
		TemplateID: w.in.TemplateID, TemplateVersion: w.in.TemplateVersion, Channel: ch,
		UserLocale: w.recipient.Locale, TenantLocale: tenantLocale, Data: w.in.Data,
	}).Get(ctx, &r); err != nil {
		var reason herald.Reason
		switch {
		case contract.RenderFailed.Is(err):
			reason = herald.ReasonRenderFailed
		case contract.ContentTooLarge.Is(err):
			reason = herald.ReasonContentTooLarge
		}
		w.finishChannel(ctx, ch, herald.DeliveryFailed, err, reason)
		return
	}
	if err := w.awaitTurn(ctx, ch); err != nil {
		w.finishChannel(ctx, ch, herald.DeliveryCancelled, err, "")
		return
	}
	w.deliverChannel(ctx, ch, r)
}

// evaluate decides channels with the pure preference rules at workflow time.
func (w *notification) evaluate(ctx workflow.Context, prefs contract.PreferencesResult, channels []herald.Channel) []preferences.Decision {
	return preferences.Evaluate(preferences.EvalInput{
		Channels: channels, Category: w.in.Category, Critical: w.in.Critical, Prefs: prefs.Prefs,
		Addresses: map[herald.Channel]bool{
			herald.ChannelEmail: w.recipient.Email != "",
			herald.ChannelSMS:   w.recipient.Phone != "",
			herald.ChannelPush:  true, // device tokens are read at send time; none → no_address then
		},
		Suppressed: prefs.Suppressed,
		Now:        workflow.Now(ctx), UserTimezone: w.recipient.Timezone,
	})
}

// schedule records that a channel waits (quiet hours), visible in the status API.
func (w *notification) schedule(ctx workflow.Context, ch herald.Channel, reason herald.Reason) {
	if w.cancelled {
		return
	}
	cs := w.state.Channels[ch]
	cs.Status, cs.Reason, cs.UpdatedAt = herald.DeliveryScheduled, reason, workflow.Now(ctx)
	if err := w.db(ctx, contract.RecordChannelStatus, contract.RecordChannelStatusInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, Channel: ch, Status: herald.DeliveryScheduled, Reason: reason,
	}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Error("recording the scheduled channel failed", "channel", ch, "error", err)
	}
}

// deliverChannel delivers the rendered channel: the in-app inbox in the workflow's
// own database activity, a provider channel as a regular activity behind the guard.
func (w *notification) deliverChannel(ctx workflow.Context, channel herald.Channel, r contract.RenderResult) {
	w.state.Channels[channel].Status = herald.DeliverySending
	d, err := contract.DeliveryPayload(contract.Addressee{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, UserID: w.in.UserID,
		Email: w.recipient.Email, Phone: w.recipient.Phone, Category: w.in.Category, AcceptedAt: w.state.AcceptedAt,
	}, channel, r)
	switch {
	case errors.Is(err, contract.ErrNoAddress):
		w.suppress(ctx, channel, herald.ReasonNoAddress)
	case err != nil:
		// The API rejects unknown channels and Render returns the channel asked for; a
		// history from a newer binary must not silently drop one, so record it failed.
		w.finishChannel(ctx, channel, herald.DeliveryFailed, fmt.Errorf("channel %q is not supported by this worker", channel), "")
	case d.InApp != nil:
		w.finishDelivery(ctx, channel, w.db(ctx, contract.DeliverInApp, *d.InApp), contract.RedrivePayload{})
	default:
		w.finishDelivery(ctx, channel, executeDelivery(ctx, d.Provider, w.retry), d.Provider)
	}
}

// executeDelivery runs the provider delivery activity a payload describes (also
// used by a redrive, so both go through the same guard).
func executeDelivery(ctx workflow.Context, p contract.RedrivePayload, retry map[herald.Channel]herald.RetryPolicy) workflow.Future {
	switch {
	case p.Email != nil:
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, providerOptions(herald.ChannelEmail, retry)), contract.DeliverEmail, *p.Email)
	case p.SMS != nil:
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, providerOptions(herald.ChannelSMS, retry)), contract.DeliverSMS, *p.SMS)
	default:
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, providerOptions(herald.ChannelPush, retry)), contract.DeliverPush, *p.Push)
	}
}

// finishDelivery records a delivery's outcome. A provider channel whose retries
// ran out (not a permanent refusal) is dead-lettered with its payload for a redrive.
func (w *notification) finishDelivery(ctx workflow.Context, channel herald.Channel, fut workflow.Future, p contract.RedrivePayload) {
	var res contract.DeliverResult
	err := fut.Get(ctx, &res)
	switch {
	case err == nil:
		w.setChannel(ctx, channel, res.Status, "")
		return
	case contract.NoDevice.Is(err):
		w.suppress(ctx, channel, herald.ReasonNoAddress)
		return
	case contract.UnknownUser.Is(err):
		w.suppress(ctx, channel, herald.ReasonUserDeleted) // erased before the send
		return
	case channel == herald.ChannelInApp || w.cancelled || contract.IsPermanent(err):
		w.finishChannel(ctx, channel, herald.DeliveryFailed, err, contract.FailureReason(err))
		return
	}
	w.setChannel(ctx, channel, herald.DeliveryFailed, contract.ErrorMessage(err))
	w.state.Channels[channel].Reason = herald.ReasonDeadLettered
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if derr := w.db(dctx, contract.DeadLetter, contract.DeadLetterInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, Channel: channel, TemplateID: w.in.TemplateID,
		Attempts: int(providerOptions(channel, w.retry).RetryPolicy.MaximumAttempts), LastError: contract.ErrorMessage(err), Payload: p,
	}).Get(ctx, nil); derr != nil {
		workflow.GetLogger(ctx).Error("dead-lettering failed", "channel", channel, "error", derr)
	}
}

// suppress records that a channel was not attempted, and why.
func (w *notification) suppress(ctx workflow.Context, channel herald.Channel, reason herald.Reason) {
	w.finishChannel(ctx, channel, herald.DeliverySuppressed, nil, reason)
}

// finishChannel records a channel outcome the workflow decided (the activity that
// would have recorded it failed, or the channel was suppressed), in PostgreSQL as
// well as in the query state.
func (w *notification) finishChannel(ctx workflow.Context, channel herald.Channel, status herald.DeliveryStatus, cause error, reason herald.Reason) {
	if w.cancelled && status == herald.DeliveryFailed {
		// The work was interrupted by the cancel, not failed by a provider.
		status, cause, reason = herald.DeliveryCancelled, nil, herald.ReasonCancelled
	}
	// Record even when the delivery context was cancelled.
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	msg := ""
	if cause != nil {
		msg = contract.ErrorMessage(cause)
	}
	w.setChannel(ctx, channel, status, msg)
	w.state.Channels[channel].Reason = reason
	if err := w.db(ctx, contract.RecordChannelStatus, contract.RecordChannelStatusInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, Channel: channel, Status: status, Error: msg, Reason: reason,
	}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Error("recording channel status failed", "channel", channel, "error", err)
	}
}

func (w *notification) setChannel(ctx workflow.Context, channel herald.Channel, status herald.DeliveryStatus, lastError string) {
	cs := w.state.Channels[channel]
	cs.Status = status
	cs.Attempts++
	if lastError != "" {
		cs.LastError = lastError
	}
	cs.UpdatedAt = workflow.Now(ctx)
}
