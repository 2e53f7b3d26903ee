package activities

import (
	"context"
	"errors"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/preferences"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/internal/unsubscribe"
)

// LoadPreferences reads and merges preferences and checks the recipient's
// addresses against the suppression list. It is called before rendering, and
// again when a quiet-hours wait ends, so a change made during the wait (an
// opt-out, a STOP) counts.
func (a *Activities) LoadPreferences(ctx context.Context, in contract.LoadPreferencesInput) (contract.PreferencesResult, error) {
	// Read again after a quiet-hours wait: a user erased meanwhile gets nothing.
	if ok, err := a.Store.UserExists(ctx, in.TenantID, in.UserID); err != nil {
		return contract.PreferencesResult{}, err
	} else if !ok {
		return contract.PreferencesResult{}, contract.UnknownUser.New("user does not exist (erased)", nil)
	}
	ts, err := a.Store.GetTenantSettings(ctx, in.TenantID)
	if err != nil {
		return contract.PreferencesResult{}, err
	}
	user, err := a.Store.GetPreferences(ctx, in.TenantID, in.UserID)
	if err != nil {
		return contract.PreferencesResult{}, err
	}
	suppressed, err := a.Store.SuppressedChannels(ctx, in.TenantID, in.Email, in.Phone)
	if err != nil {
		return contract.PreferencesResult{}, err
	}
	return contract.PreferencesResult{Prefs: preferences.Merge(ts.PreferenceDefaults, user), Suppressed: suppressed, CategoryCaps: ts.CategoryCaps,
		DefaultLocale: ts.DefaultLocale, RetryPolicies: ts.RetryPolicies}, nil
}

// ClaimCap reports whether the notification fits under the cap (see store.ClaimCap).
func (a *Activities) ClaimCap(ctx context.Context, in contract.ClaimCapInput) (bool, error) {
	return a.Store.ClaimCap(ctx, store.ClaimCapParams{
		TenantID: in.TenantID, UserID: in.UserID, Category: in.Category, NotificationID: in.NotificationID, Limit: in.Limit, At: in.At,
	})
}

// Render renders one channel of the template version the notification was accepted
// with, in the user's locale (falling back to the language, the tenant default,
// then English). Non-critical email carries RFC 8058 one-click unsubscribe headers.
func (a *Activities) Render(ctx context.Context, in contract.RenderInput) (contract.RenderResult, error) {
	rec, err := a.Store.GetTemplate(ctx, in.TenantID, in.TemplateID, in.TemplateVersion)
	if errors.Is(err, herald.ErrNotFound) {
		return contract.RenderResult{}, contract.RenderFailed.New("template "+in.TemplateID+" version is gone", err)
	}
	if err != nil {
		return contract.RenderResult{}, err
	}
	t := rec.Template
	locale := templates.ResolveLocale(in.UserLocale, t.AvailableLocales(), in.TenantLocale)
	r, err := templates.Render(t, in.Channel, locale, in.Data)
	if err != nil {
		return contract.RenderResult{}, contract.RenderFailed.New(err.Error(), err)
	}
	// The API refused content over the bound at submit time, for the locale the
	// user had then; a locale (or tenant default) changed since can still pick a
	// larger variant. Returning it would make Temporal terminate the run, so the
	// channel fails here, visibly, with reason content_too_large.
	if err := contract.CheckRendered(r); err != nil {
		return contract.RenderResult{}, contract.ContentTooLarge.New(err.Error(), err)
	}
	return contract.RenderResult{Rendered: r, Headers: a.emailHeaders(in.Channel, in.TenantID, in.UserID, t)}, nil
}

// emailHeaders are the extra headers of a user's email rendered from t: RFC 8058
// one-click unsubscribe, unless the template is critical (a password reset
// cannot be unsubscribed from) or the worker signs no unsubscribe links. Other
// channels have none.
func (a *Activities) emailHeaders(channel herald.Channel, tenantID, userID string, t templates.Template) map[string]string {
	if channel != herald.ChannelEmail || t.Critical || a.Unsubscribe == nil {
		return nil
	}
	link := a.Unsubscribe.URL(a.PublicBaseURL, unsubscribe.Claims{TenantID: tenantID, UserID: userID, Category: t.Category})
	return map[string]string{
		"List-Unsubscribe":      "<" + link + ">",
		"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
	}
}
