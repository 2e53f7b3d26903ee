package api

import (
	"context"
	"log/slog"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/workflows"
)

// Ordered delivery (docs/ordering.md): the accept path takes an ordered
// notification's places in its lanes right after its workflow started, so
// notifications submitted one after another are handed to the provider in that
// order whatever order their workflows run in; the tenant's max_hold bounds
// how long one waits for an earlier one, within the operator's bounds.

// OrderingConfig is the operator's bounds on a tenant's max_hold
// (HERALD_ORDERING_MAX_HOLD_MIN, HERALD_ORDERING_MAX_HOLD_MAX; zero: the
// defaults).
type OrderingConfig struct {
	MinHold, MaxHold time.Duration
}

// The operator bounds' defaults.
const (
	DefaultOrderingMinHold = time.Second
	DefaultOrderingMaxHold = time.Hour
)

// bounds are the effective bounds (defaults for zero values; a minimum over
// the maximum is lowered to it).
func (o OrderingConfig) bounds() (lo, hi time.Duration) {
	lo, hi = o.MinHold, o.MaxHold
	if lo <= 0 {
		lo = DefaultOrderingMinHold
	}
	if hi <= 0 {
		hi = DefaultOrderingMaxHold
	}
	return min(lo, hi), hi
}

// clamp is d (0: herald.DefaultOrderMaxHold) within the bounds: a tenant value
// stored before the operator narrowed them counts as the nearest bound.
func (o OrderingConfig) clamp(d time.Duration) time.Duration {
	if d <= 0 {
		d = herald.DefaultOrderMaxHold
	}
	lo, hi := o.bounds()
	return min(max(d, lo), hi)
}

// holdFor is the tenant's effective max_hold, from the settings the accept
// path reads anyway (cached a few seconds); unreadable settings give the
// default (logged): the notification is still accepted.
func (o OrderingConfig) holdFor(ctx context.Context, sc *settingsCache, log *slog.Logger, tenantID string) time.Duration {
	ts, err := sc.get(ctx, tenantID)
	if err != nil {
		log.Warn("reading the tenant's max_hold failed; using the default", "tenant_id", tenantID, "error", err)
		return o.clamp(0)
	}
	return o.clamp(ts.OrderingMaxHold)
}

// validHold checks a max_hold a tenant sets: a Go duration within the bounds.
func (o OrderingConfig) validHold(v *string) (time.Duration, *httpError) {
	if v == nil {
		return 0, nil
	}
	lo, hi := o.bounds()
	d, err := time.ParseDuration(*v)
	if err != nil || d < lo || d > hi {
		return 0, badField("ordering_max_hold", "invalid_field", "ordering_max_hold must be a duration from %s to %s (the operator's bounds), such as \"2m\"", lo, hi)
	}
	return d, nil
}

// claimOrderPlaces takes the places of a notification due at once in its
// lanes, one per provider channel, before the 202. A failure is logged, not
// answered: the start is the acceptance, and the workflow takes the places
// itself when its channels start (a little later in the lane).
func (h *notificationsRoom) claimOrderPlaces(ctx context.Context, in workflows.NotificationInput, workflowID, runID, notificationID string) {
	if in.OrderingKey == "" || !in.SendAt.IsZero() {
		return
	}
	var claims []herald.OrderClaim
	for _, ch := range in.Channels {
		if herald.IsProviderChannel(ch) {
			claims = append(claims, herald.OrderClaim{TenantID: in.TenantID, UserID: in.UserID, Channel: ch, OrderingKey: in.OrderingKey,
				NotificationID: notificationID, WorkflowID: workflowID, RunID: runID})
		}
	}
	if len(claims) == 0 {
		return
	}
	if _, err := h.store.ClaimOrderHandoffs(ctx, claims, false); err != nil {
		h.log.Warn("taking the notification's order places at acceptance failed; its workflow takes them", "notification_id", notificationID, "error", err)
	}
}
