package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/preferences"
)

// gateAndDeliver applies preferences, quiet hours and caps before anything is
// rendered (so opted-out content is never produced, nor logged), then renders and
// delivers each surviving channel on its own.
func (w *notification) gateAndDeliver(ctx workflow.Context) error {
	var prefs contract.PreferencesResult
	if err := w.db(ctx, a.LoadPreferences, contract.LoadPreferencesInput{
		TenantID: w.in.TenantID, UserID: w.in.UserID,
	}).Get(ctx, &prefs); err != nil {
		return err
	}
	w.retry = prefs.RetryPolicies
	decisions := map[string]preferences.Decision{}
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
		if err := w.db(ctx, a.ClaimCap, contract.ClaimCapInput{
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

	w.eachChannel(ctx, func(ctx workflow.Context, ch string) {
		w.channelFlow(ctx, ch, decisions[ch], prefs.DefaultLocale)
	})
	return nil
}

// channelFlow waits out quiet hours (re-reading preferences when the wait ends, so a
// change made meanwhile is honoured), then renders and delivers the channel.
func (w *notification) channelFlow(ctx workflow.Context, ch string, d preferences.Decision, tenantLocale string) {
	for d.Action == preferences.Defer {
		w.schedule(ctx, ch, d.Reason)
		if err := workflow.Sleep(ctx, d.DeferUntil.Sub(workflow.Now(ctx))); err != nil {
			w.finishChannel(ctx, ch, herald.DeliveryCancelled, err, "")
			return
		}
		var prefs contract.PreferencesResult
		if err := w.db(ctx, a.LoadPreferences, contract.LoadPreferencesInput{
			TenantID: w.in.TenantID, UserID: w.in.UserID,
		}).Get(ctx, &prefs); err != nil {
			w.finishChannel(ctx, ch, herald.DeliveryFailed, err, "")
			return
		}
		d = w.evaluate(ctx, prefs, []string{ch})[0]
	}
	if d.Action == preferences.Suppress {
		w.suppress(ctx, ch, d.Reason)
		return
	}

	var r contract.RenderResult
	if err := w.db(ctx, a.Render, contract.RenderInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, UserID: w.in.UserID,
		TemplateID: w.in.TemplateID, TemplateVersion: w.in.TemplateVersion, Channel: ch,
		UserLocale: w.recipient.Locale, TenantLocale: tenantLocale, Data: w.in.Data,
	}).Get(ctx, &r); err != nil {
		reason := ""
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == herald.ErrTypeRenderFailed {
			reason = herald.ReasonRenderFailed
		}
		w.finishChannel(ctx, ch, herald.DeliveryFailed, err, reason)
		return
	}
	w.deliverChannel(ctx, ch, contentOf(r))
}

// evaluate decides channels with the pure preference rules at workflow time.
func (w *notification) evaluate(ctx workflow.Context, prefs contract.PreferencesResult, channels []string) []preferences.Decision {
	return preferences.Evaluate(preferences.EvalInput{
		Channels: channels, Category: w.in.Category, Critical: w.in.Critical, Prefs: prefs.Prefs,
		Addresses: map[string]bool{
			herald.ChannelEmail: w.recipient.Email != "",
			herald.ChannelSMS:   w.recipient.Phone != "",
			herald.ChannelPush:  true, // device tokens are read at send time; none → no_address then
		},
		Now: workflow.Now(ctx), UserTimezone: w.recipient.Timezone,
	})
}

// schedule records that a channel waits (quiet hours), visible in the status API.
func (w *notification) schedule(ctx workflow.Context, ch, reason string) {
	if w.cancelled {
		return
	}
	cs := w.state.Channels[ch]
	cs.Status, cs.Reason, cs.UpdatedAt = herald.DeliveryScheduled, reason, workflow.Now(ctx)
	if err := w.db(ctx, a.RecordChannelStatus, contract.RecordChannelStatusInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, Channel: ch, Status: herald.DeliveryScheduled, Reason: reason,
	}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Error("recording the scheduled channel failed", "channel", ch, "error", err)
	}
}

func contentOf(r contract.RenderResult) content {
	var c content
	switch {
	case r.Rendered.InApp != nil:
		c.Title, c.Body, c.ActionURL = r.Rendered.InApp.Title, r.Rendered.InApp.Body, r.Rendered.InApp.ActionURL
	case r.Rendered.Email != nil:
		c.Subject, c.HTML, c.Text, c.Headers = r.Rendered.Email.Subject, r.Rendered.Email.HTML, r.Rendered.Email.Text, r.Headers
	case r.Rendered.SMS != nil:
		c.SMS = r.Rendered.SMS.Text
	case r.Rendered.Push != nil:
		c.Title, c.Body, c.PushData = r.Rendered.Push.Title, r.Rendered.Push.Body, r.Rendered.Push.Data
	}
	return c
}
