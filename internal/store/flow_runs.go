package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
)

// FlowRunRecord is what a flow run records when it starts: the event's
// notifications row (no channels of its own: each send step is a notification
// of its own), the dedup ledger row when BodyHash is set, and its flow_runs row.
type FlowRunRecord struct {
	TenantID       string
	NotificationID string
	UserID         string
	FlowID         string
	FlowVersion    int
	Category       string
	DigestID       string
	WorkflowID     string
	RunID          string
	DedupKeyHash   string
	AcceptedAt     time.Time
	BodyHash       []byte
	DedupUntil     time.Time
}

// RecordFlowRun writes r's rows in one transaction; re-running it (an activity
// retry) changes nothing.
func (s *Store) RecordFlowRun(ctx context.Context, r FlowRunRecord) error {
	return s.InTx(ctx, func(tx *Store) error {
		n := Notification{TenantID: r.TenantID, ID: r.NotificationID, UserID: r.UserID, Channels: []herald.Channel{},
			WorkflowID: r.WorkflowID, RunID: r.RunID, DedupKeyHash: r.DedupKeyHash, Status: herald.NotificationSending,
			AcceptedAt: r.AcceptedAt, Category: r.Category}
		if r.BodyHash != nil {
			until := r.DedupUntil
			n.Dedup = &Dedup{KeyHash: r.DedupKeyHash, BodyHash: r.BodyHash, FirstSeenAt: r.AcceptedAt, DedupUntil: &until}
		}
		if err := tx.InsertNotification(ctx, n); err != nil {
			return err
		}
		_, err := tx.db.Exec(ctx, `
			INSERT INTO flow_runs (tenant_id, notification_id, flow_id, flow_version, user_id, digest_id, created_at)
			VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), $7)
			ON CONFLICT (tenant_id, notification_id) DO NOTHING`,
			r.TenantID, r.NotificationID, r.FlowID, r.FlowVersion, r.UserID, r.DigestID, r.AcceptedAt)
		return err
	})
}

// FlowStepRecord is one step of a flow run as recorded.
type FlowStepRecord struct {
	// Path is the step's place in the definition: "2", or "1.case0.0" inside a
	// branch's first case ("1.else.0" in its else).
	Path    string             `json:"path"`
	StepID  string             `json:"id,omitempty"`
	Type    string             `json:"type"`
	Outcome herald.StepOutcome `json:"outcome"`
	// NotificationID is the notification a send step started.
	NotificationID string     `json:"notification_id,omitempty"`
	StartedAt      time.Time  `json:"started_at"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
}

// RecordFlowStep records (or moves forward) one step of a run; ref is a send
// step's notification id, or a digest step's digest key.
func (s *Store) RecordFlowStep(ctx context.Context, tenantID, notificationID string, st FlowStepRecord) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO flow_steps (tenant_id, notification_id, path, step_id, type, outcome, ref_notification_id, started_at, finished_at)
		VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''), $8, $9)
		ON CONFLICT (tenant_id, notification_id, path) DO UPDATE
		SET outcome = EXCLUDED.outcome, ref_notification_id = COALESCE(EXCLUDED.ref_notification_id, flow_steps.ref_notification_id),
			finished_at = EXCLUDED.finished_at`,
		tenantID, notificationID, st.Path, st.StepID, st.Type, st.Outcome, st.NotificationID, st.StartedAt, st.FinishedAt)
	return err
}

// FlowRun is a flow run as the status API shows it.
type FlowRun struct {
	NotificationID string `json:"-"`
	FlowID         string `json:"flow_id"`
	FlowVersion    int    `json:"flow_version"`
	UserID         string `json:"-"`
	// DigestID is set on a digest's continuation run (the steps after a digest).
	DigestID string           `json:"digest_id,omitempty"`
	Steps    []FlowStepRecord `json:"steps"`
	// Digest is the digest the event joined (nil when it joined none).
	Digest *DigestMembership `json:"digest,omitempty"`
}

// DigestMembership is the digest an event joined.
type DigestMembership struct {
	// DigestKey names the digest (user, flow and key) while it is open.
	DigestKey string `json:"digest_key"`
	// DigestID is the closed digest the event is in ("" while open).
	DigestID string `json:"digest_id,omitempty"`
	// Status: herald.DigestOpen, herald.DigestSent, or "cancelled" (the event
	// was removed before the digest closed).
	Status string `json:"status"`
	// NotificationID is the digest's own send (its continuation run), once started.
	NotificationID string `json:"notification_id,omitempty"`
}

// FlowRunOf is the flow run of a notification: its flow, each step recorded so
// far (in path order) and the digest it joined. herald.ErrNotFound when the
// notification is not a flow run (or not the tenant's).
func (s *Store) FlowRunOf(ctx context.Context, tenantID, notificationID string) (FlowRun, error) {
	r := FlowRun{NotificationID: notificationID, Steps: []FlowStepRecord{}}
	var digestID *string
	if err := s.db.QueryRow(ctx, `SELECT flow_id, flow_version, user_id, digest_id FROM flow_runs WHERE tenant_id = $1 AND notification_id = $2`,
		tenantID, notificationID).Scan(&r.FlowID, &r.FlowVersion, &r.UserID, &digestID); err != nil {
		return FlowRun{}, dbx.NotFound(err)
	}
	if digestID != nil {
		r.DigestID = *digestID
	}
	rows, err := s.db.Query(ctx, `
		SELECT path, step_id, type, outcome, COALESCE(ref_notification_id, ''), started_at, finished_at
		FROM flow_steps WHERE tenant_id = $1 AND notification_id = $2 ORDER BY started_at, path`, tenantID, notificationID)
	if err != nil {
		return FlowRun{}, err
	}
	r.Steps, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (FlowStepRecord, error) {
		var st FlowStepRecord
		err := row.Scan(&st.Path, &st.StepID, &st.Type, &st.Outcome, &st.NotificationID, &st.StartedAt, &st.FinishedAt)
		return st, err
	})
	if err != nil {
		return FlowRun{}, err
	}
	for i, st := range r.Steps {
		if st.Type == "digest" {
			r.Steps[i].NotificationID = "" // the ref of a digest step is its digest key
		}
	}
	m, err := s.digestMembership(ctx, tenantID, notificationID)
	switch {
	case err == nil:
		r.Digest = &m
	case !errors.Is(err, herald.ErrNotFound):
		return FlowRun{}, err
	}
	return r, nil
}

// digestMembership is the digest row of an event, with the notification id of
// its digest's continuation run once that has started.
func (s *Store) digestMembership(ctx context.Context, tenantID, notificationID string) (DigestMembership, error) {
	var m DigestMembership
	var digestID *string
	var cancelled bool
	var sendID *string
	err := s.db.QueryRow(ctx, `
		SELECT e.digest_key, e.digest_id, e.cancelled,
			(SELECT r.notification_id FROM flow_runs r WHERE r.tenant_id = e.tenant_id AND r.digest_id = e.digest_id LIMIT 1)
		FROM digest_events e WHERE e.tenant_id = $1 AND e.notification_id = $2`, tenantID, notificationID).
		Scan(&m.DigestKey, &digestID, &cancelled, &sendID)
	if err != nil {
		return m, dbx.NotFound(err)
	}
	switch {
	case cancelled:
		m.Status = string(herald.NotificationCancelled)
	case digestID == nil:
		m.Status = herald.DigestOpen
	default:
		m.DigestID, m.Status = *digestID, herald.DigestSent
	}
	if sendID != nil {
		m.NotificationID = *sendID
	}
	return m, nil
}
