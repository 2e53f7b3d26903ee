package api

import (
	"context"
	"time"

	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/workflows"
)

// flowEngine is what the flow endpoints need of the flow engine: starting an
// event's run and flushing a digest (workflows.Client), and reading a run's
// steps and a user's open digests (the engine's tables). engineFlows
// implements it over workflows.Client and the store; the handlers see only
// this, so what they answer does not depend on how the engine stores things.
type flowEngine interface {
	// StartFlow starts an event's run; a run already open with workflowID is
	// reported as Existing (a duplicate inside its dedup window).
	StartFlow(ctx context.Context, workflowID string, lane herald.Lane, ev flowEvent) (workflows.StartedRun, error)
	// AcceptDigestEvent accepts an event of a flow whose first step is a
	// digest without a run of its own: its rows (Layer 1 by the key's row),
	// then the digest's signal. A key inside its window answers Duplicate with
	// the original's id; an error after the rows committed is Signal (the
	// sweeper signals the digest later).
	AcceptDigestEvent(ctx context.Context, key ids.KeyHash, lane herald.Lane, ev flowEvent) (digestAccept, error)
	// FlushDigest closes the open digest of a flow for a user and key now;
	// workflows.ErrRunNotFound when none is open.
	FlushDigest(ctx context.Context, tenantID, flowID, userID, key string) error
	// FlowRun is the run of a flow event (herald.ErrNotFound when the
	// notification is not one).
	FlowRun(ctx context.Context, tenantID, notificationID string) (flowRunView, error)
	// OpenDigests is a page of a user's open digests (by flow, then key) after
	// the given position (nil: the first page), at most limit, and whether more follow.
	OpenDigests(ctx context.Context, tenantID, userID string, after *store.OpenDigestsAfter, limit int) ([]openDigestView, bool, error)
}

// flowEvent is one accepted event of a flow, as the API hands it to the engine.
type flowEvent struct {
	TenantID    string
	UserID      string
	FlowID      string
	FlowVersion int
	Flow        flows.Definition
	Data        templates.Data
	DedupWindow time.Duration
	BodyHash    []byte
}

// digestAccept is what accepting a digest event did.
type digestAccept struct {
	NotificationID string
	Duplicate      bool
	// SignalErr: the event's rows committed but its digest was not signalled.
	SignalErr error
}

// flowRunView is the run of a flow event in the status view (the "flow"
// object of GET /v1/notifications/{id}).
type flowRunView struct {
	FlowID      string `json:"flow_id"`
	FlowVersion int    `json:"flow_version"`
	// DigestID is set on a digest's own run: the steps after a digest step,
	// run once for all the digest's events.
	DigestID string         `json:"digest_id,omitempty"`
	Steps    []flowStepView `json:"steps"`
	// Digest is the digest the event joined (absent when it joined none).
	Digest *digestJoinedView `json:"digest,omitempty"`
}

// flowStepView is one step of a run: where it is in the definition, its
// outcome (herald.StepOutcome) and when it started and ended.
type flowStepView struct {
	// Path is the step's place in the definition, as in validation errors
	// ("steps[1].cases[0].steps[0]").
	Path    string         `json:"path"`
	StepID  string         `json:"id,omitempty"`
	Type    flows.StepType `json:"type"`
	Outcome string         `json:"outcome"`
	// NotificationID is the notification a send step started (its own status,
	// channels and attempts are GET /v1/notifications/{notification_id}).
	NotificationID string     `json:"notification_id,omitempty"`
	StartedAt      time.Time  `json:"started_at"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
}

// digestJoinedView is the digest an event joined.
type digestJoinedView struct {
	// DigestID is the digest's id once it has closed with the event; absent
	// while the digest is open.
	DigestID string `json:"digest_id,omitempty"`
	// Status: open, sent, or cancelled (the event left it before it closed).
	Status string `json:"status"`
	// Sent: the digest closed with the event and its steps ran.
	Sent bool `json:"sent"`
	// NotificationID is the digest's own run (its status shows the digest's
	// sends), once it has started.
	NotificationID string `json:"notification_id,omitempty"`
}

// openDigestView is one open digest of a user (GET /v1/users/{user_id}/digests).
type openDigestView struct {
	FlowID string `json:"flow_id"`
	Key    string `json:"key"`
	// Count is counted up to store.MaxCountedDigestEvents; CountCapped says it
	// holds more.
	Count       int       `json:"count"`
	CountCapped bool      `json:"count_capped"`
	OpenedAt    time.Time `json:"opened_at"`
	ClosesAt    time.Time `json:"closes_at"`
}
