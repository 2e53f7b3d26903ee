package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/herald-notify/herald/internal/preferences"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/internal/unsubscribe"
)

// ErrTypeRenderFailed: the template cannot produce this channel's content from the
// data (a render error, an oversized push payload); retrying cannot help.
const ErrTypeRenderFailed = "RenderFailed"

// LoadPreferencesInput names the user.
type LoadPreferencesInput struct {
	TenantID string
	UserID   string
}

// PreferencesResult is what gating needs: the user's effective preferences (tenant
// defaults overridden by the user's own), the tenant's caps and default locale.
type PreferencesResult struct {
	Prefs         preferences.Preferences
	CategoryCaps  map[string]int
	DefaultLocale string
	RetryPolicies map[string]store.RetryPolicy
}

// LoadPreferences reads and merges preferences. It is called before rendering, and
// again when a quiet-hours wait ends, so a change made during the wait counts.
func (a *Activities) LoadPreferences(ctx context.Context, in LoadPreferencesInput) (PreferencesResult, error) {
	ts, err := a.Store.GetTenantSettings(ctx, in.TenantID)
	if err != nil {
		return PreferencesResult{}, err
	}
	user, err := a.Store.GetPreferences(ctx, in.TenantID, in.UserID)
	if err != nil {
		return PreferencesResult{}, err
	}
	return PreferencesResult{Prefs: preferences.Merge(ts.PreferenceDefaults, user), CategoryCaps: ts.CategoryCaps,
		DefaultLocale: ts.DefaultLocale, RetryPolicies: ts.RetryPolicies}, nil
}

// ClaimCapInput counts one notification against the user's category cap.
type ClaimCapInput struct {
	TenantID       string
	UserID         string
	Category       string
	NotificationID string
	Limit          int
	At             time.Time
}

// ClaimCap reports whether the notification fits under the cap (see store.ClaimCap).
func (a *Activities) ClaimCap(ctx context.Context, in ClaimCapInput) (bool, error) {
	return a.Store.ClaimCap(ctx, in.TenantID, in.UserID, in.Category, in.NotificationID, in.Limit, in.At)
}

// RenderInput selects the template version, channel and data to render.
type RenderInput struct {
	TenantID        string
	NotificationID  string
	UserID          string
	TemplateID      string
	TemplateVersion int
	Channel         string
	UserLocale      string
	TenantLocale    string
	Data            map[string]any
}

// RenderResult is the channel's content; Headers are extra email headers.
type RenderResult struct {
	Rendered templates.Rendered
	Headers  map[string]string
}

// Render renders one channel of the template version the notification was accepted
// with, in the user's locale (falling back to the language, the tenant default,
// then English). Non-critical email carries RFC 8058 one-click unsubscribe headers.
func (a *Activities) Render(ctx context.Context, in RenderInput) (RenderResult, error) {
	rec, err := a.Store.GetTemplate(ctx, in.TenantID, in.TemplateID, in.TemplateVersion)
	if errors.Is(err, store.ErrNotFound) {
		return RenderResult{}, temporal.NewNonRetryableApplicationError("template "+in.TemplateID+" version is gone", ErrTypeRenderFailed, err)
	}
	if err != nil {
		return RenderResult{}, err
	}
	t := rec.Template
	locale := templates.ResolveLocale(in.UserLocale, t.AvailableLocales(), in.TenantLocale)
	r, err := templates.Render(t, in.Channel, locale, in.Data)
	if err != nil {
		return RenderResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeRenderFailed, err)
	}
	out := RenderResult{Rendered: r}
	if in.Channel == templates.ChannelEmail && !t.Critical && a.Unsubscribe != nil {
		link := a.Unsubscribe.URL(a.PublicBaseURL, unsubscribe.Claims{TenantID: in.TenantID, UserID: in.UserID, Category: t.Category})
		out.Headers = map[string]string{
			"List-Unsubscribe":      "<" + link + ">",
			"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
		}
	}
	return out, nil
}
