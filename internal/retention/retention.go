// Package retention says how long Herald keeps each kind of row: the
// operator's policy (HERALD_RETENTION_*, which is both every tenant's default
// and the longest a tenant may ask for) and a tenant's own, shorter settings
// (PUT /v1/settings "retention"). The maintenance workflow
// (workflows.MaintenanceWorkflow) enforces it; docs/retention.md describes
// every kind.
package retention

import (
	"fmt"
	"time"
)

// Policy is one retention policy. Durations count from the row's time
// (accepted_at, created_at, at; for dead letters, the moment they were
// resolved; for campaigns, the moment they finished).
type Policy struct {
	// Notifications: notifications, their deliveries, delivery attempts and
	// provider receipts.
	Notifications time.Duration `json:"notifications"`
	// InboxItems is how many items a user's inbox keeps (the newest);
	// InboxAge drops older items whatever their number. The inbox event log
	// keeps store.InboxEventRetention events per user (pruned as it is
	// written) and none older than InboxAge.
	InboxItems int           `json:"inbox_items"`
	InboxAge   time.Duration `json:"inbox_age"`
	// Sandbox: what the sandbox provider recorded.
	Sandbox time.Duration `json:"sandbox"`
	// Webhooks: tenant webhook messages and their attempts.
	Webhooks time.Duration `json:"webhooks"`
	// DeadLetters: dead letters, counted from their resolution. An open dead
	// letter is kept, and keeps its notification's time partitions for this
	// long from its creation (store.DropPartitions); past that its
	// notification goes with its day, and the dead letter after it.
	DeadLetters time.Duration `json:"dead_letters"`
	// Audit: the audit log.
	Audit time.Duration `json:"audit"`
	// Campaigns: finished campaigns' rows (the campaign and its pending
	// retries), counted from the end of the campaign.
	Campaigns time.Duration `json:"campaigns"`
}

// Defaults is the operator policy when no HERALD_RETENTION_* is set.
var Defaults = Policy{
	Notifications: 30 * Day,
	InboxItems:    100,
	InboxAge:      90 * Day,
	Sandbox:       7 * Day,
	Webhooks:      30 * Day,
	DeadLetters:   30 * Day,
	Audit:         365 * Day,
	Campaigns:     30 * Day,
}

// Day is 24 hours.
const Day = 24 * time.Hour

// MaxInboxItems bounds an operator's inbox cap.
const MaxInboxItems = 100_000

// Field is one setting of a Policy: its JSON name, its environment variable
// and where it lives, in the operator's Policy (Dur or Int) and in a tenant's
// own settings (TenantDur or TenantInt, the same kind). Fields lists them
// all, in document order; the config, the API's validation, Tenant.Set and
// Tenant.Policy and the docs work from it.
type Field struct {
	Name      string
	Env       string
	Dur       func(*Policy) *time.Duration
	Int       func(*Policy) *int
	TenantDur func(*Tenant) *Seconds
	TenantInt func(*Tenant) *int
}

// Fields is every setting of a Policy.
var Fields = []Field{
	{Name: "notifications", Env: "HERALD_RETENTION_NOTIFICATIONS",
		Dur: func(p *Policy) *time.Duration { return &p.Notifications }, TenantDur: func(t *Tenant) *Seconds { return &t.Notifications }},
	{Name: "inbox_items", Env: "HERALD_RETENTION_INBOX_ITEMS",
		Int: func(p *Policy) *int { return &p.InboxItems }, TenantInt: func(t *Tenant) *int { return &t.InboxItems }},
	{Name: "inbox_age", Env: "HERALD_RETENTION_INBOX_AGE",
		Dur: func(p *Policy) *time.Duration { return &p.InboxAge }, TenantDur: func(t *Tenant) *Seconds { return &t.InboxAge }},
	{Name: "sandbox", Env: "HERALD_RETENTION_SANDBOX",
		Dur: func(p *Policy) *time.Duration { return &p.Sandbox }, TenantDur: func(t *Tenant) *Seconds { return &t.Sandbox }},
	{Name: "webhooks", Env: "HERALD_RETENTION_WEBHOOKS",
		Dur: func(p *Policy) *time.Duration { return &p.Webhooks }, TenantDur: func(t *Tenant) *Seconds { return &t.Webhooks }},
	{Name: "dead_letters", Env: "HERALD_RETENTION_DEAD_LETTERS",
		Dur: func(p *Policy) *time.Duration { return &p.DeadLetters }, TenantDur: func(t *Tenant) *Seconds { return &t.DeadLetters }},
	{Name: "audit", Env: "HERALD_RETENTION_AUDIT",
		Dur: func(p *Policy) *time.Duration { return &p.Audit }, TenantDur: func(t *Tenant) *Seconds { return &t.Audit }},
	{Name: "campaigns", Env: "HERALD_RETENTION_CAMPAIGNS",
		Dur: func(p *Policy) *time.Duration { return &p.Campaigns }, TenantDur: func(t *Tenant) *Seconds { return &t.Campaigns }},
}

// Validate checks an operator policy: every duration at least a second,
// the inbox cap 1..MaxInboxItems.
func (p Policy) Validate() error {
	for _, f := range Fields {
		if f.Dur != nil && *f.Dur(&p) < time.Second {
			return fmt.Errorf("%s must be at least 1s", f.Env)
		}
		if f.Int != nil && (*f.Int(&p) < 1 || *f.Int(&p) > MaxInboxItems) {
			return fmt.Errorf("%s must be from 1 to %d", f.Env, MaxInboxItems)
		}
	}
	return nil
}

// Tenant is a tenant's own settings: a zero field means the operator's value.
// Stored as tenant_settings.retention.
type Tenant struct {
	Notifications Seconds `json:"notifications,omitempty"`
	InboxItems    int     `json:"inbox_items,omitempty"`
	InboxAge      Seconds `json:"inbox_age,omitempty"`
	Sandbox       Seconds `json:"sandbox,omitempty"`
	Webhooks      Seconds `json:"webhooks,omitempty"`
	DeadLetters   Seconds `json:"dead_letters,omitempty"`
	Audit         Seconds `json:"audit,omitempty"`
	Campaigns     Seconds `json:"campaigns,omitempty"`
}

// Seconds is a duration stored as whole seconds.
type Seconds int64

// Duration is s as a time.Duration.
func (s Seconds) Duration() time.Duration { return time.Duration(s) * time.Second }

// Policy is the tenant's effective policy under the operator's: each of the
// tenant's settings where it has one (and it is not longer than the
// operator's: a tenant can shorten, never lengthen), the operator's
// otherwise. An operator who shortens the policy later shortens every tenant's
// longer setting with it.
func (t Tenant) Policy(op Policy) Policy {
	p := op
	for _, f := range Fields {
		if f.Dur != nil {
			if s := *f.TenantDur(&t); s > 0 && s.Duration() < *f.Dur(&p) {
				*f.Dur(&p) = s.Duration()
			}
		} else if n := *f.TenantInt(&t); n > 0 && n < *f.Int(&p) {
			*f.Int(&p) = n
		}
	}
	return p
}

// Set stores field name's value v (seconds, or items for inbox_items) in t;
// a name that is not in Fields changes nothing.
func (t *Tenant) Set(name string, v int64) {
	for _, f := range Fields {
		switch {
		case f.Name != name:
		case f.TenantDur != nil:
			*f.TenantDur(t) = Seconds(v)
		default:
			*f.TenantInt(t) = int(v)
		}
	}
}

// IsZero reports whether t sets nothing (the operator's policy applies whole).
func (t Tenant) IsZero() bool { return t == Tenant{} }

// Shortens reports whether t shortens any kind of op's: only such a tenant
// needs rows of its own deleted before the operator's cut-off.
func (t Tenant) Shortens(op Policy) bool { return t.Policy(op) != op }

// AuditKeyID is the api_key_id of the audit entries maintenance writes (no API
// key made them).
const AuditKeyID = "maintenance"

// AuditPruned is the action of the audit entry that tells a tenant what
// maintenance deleted of its rows (details.deleted: kind → rows); GET
// /v1/audit-log filters by it like by the API's own actions.
const AuditPruned = "retention.pruned"
