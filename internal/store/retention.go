package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/retention"
)

// The maintenance workflow's deletes (docs/retention.md). Each deletes at most
// a batch of one tenant's rows older than a cut-off, by an index that starts
// with (tenant_id, the row's time), so a batch costs the rows it deletes and
// never a scan; the workflow calls it until it deletes less than a batch.

// PruneKind names one kind of rows the maintenance workflow deletes.
type PruneKind string

// The kinds Prune deletes.
const (
	// PruneNotifications: notifications accepted before the cut-off and no
	// longer in flight, with their deliveries, attempts, receipts, dead
	// letters and due-sequence numbers (notification_sequences; the user's
	// counter stays, so numbers never repeat), in one statement (a tenant's
	// shorter retention: the operator's drops partitions).
	PruneNotifications PruneKind = "notifications"
	// PruneReceipts: provider receipts received before the cut-off (the
	// notification history's: their notification's partition is gone).
	PruneReceipts PruneKind = "provider_receipts"
	// PruneOldDeadLetters: dead letters, open or not, older than the
	// notification history's retention whose notification is gone (its
	// partition dropped: nothing is left to redrive).
	PruneOldDeadLetters PruneKind = "dead_letters_expired"
	// PruneSequences: due-sequence numbers assigned before the cut-off (the
	// notification history's: their notifications' partitions are gone; the
	// users' counters stay).
	PruneSequences PruneKind = "notification_sequences"
	// PruneLedger: dedup-ledger rows whose window ended before the cut-off.
	PruneLedger PruneKind = "dedup_ledger"
	// PruneCapLedger: cap claims older than the cut-off.
	PruneCapLedger PruneKind = "cap_ledger"
	// PruneSandbox: sandbox messages recorded before the cut-off.
	PruneSandbox PruneKind = "sandbox_messages"
	// PruneWebhookAttempts and PruneWebhookMessages: webhook attempts, and
	// messages no longer pending, created before the cut-off.
	PruneWebhookAttempts PruneKind = "webhook_attempts"
	PruneWebhookMessages PruneKind = "webhook_messages"
	// PruneDeadLetters: dead letters resolved (redriven) before the cut-off;
	// an open one is kept here whatever its age (PruneOldDeadLetters deletes
	// it once its notification is gone, which an open dead letter delays only
	// for the dead-letter retention: DropPartitions).
	PruneDeadLetters PruneKind = "dead_letters"
	// PruneAudit: audit log entries written before the cut-off.
	PruneAudit PruneKind = "audit_log"
	// PruneCampaigns: campaigns finished before the cut-off, with their
	// pending retries (ON DELETE CASCADE).
	PruneCampaigns PruneKind = "campaigns"
	// PruneInboxEvents: inbox events written before the cut-off (the inbox's
	// age limit; the log also keeps only InboxEventRetention per user).
	PruneInboxEvents PruneKind = "inbox_events"
	// PruneOrderHandoffs: ordered channels' hand-offs done before the cut-off
	// (only the status view reads them then); PruneOrderLanes: lanes created
	// before it left with none (order_lanes.go, docs/ordering.md).
	PruneOrderHandoffs PruneKind = "order_handoffs"
	PruneOrderLanes    PruneKind = "order_lanes"
)

// pruneSQL is each kind's statement: $1 the tenant, $2 the cut-off, $3 the
// batch. The inner SELECT walks the kind's (tenant_id, time) index; the outer
// DELETE names the tenant too, so it finds each row by the (tenant_id, id)
// primary key (by id alone it scanned the whole table, every batch).
var pruneSQL = map[PruneKind]string{
	// Deliveries, attempts, receipts and dead letters have no foreign key to
	// notifications (partitioned tables, migration 0102): the statement
	// deletes them with their notifications.
	PruneNotifications: `WITH n AS (
			DELETE FROM notifications n USING (
				SELECT id, accepted_at FROM notifications WHERE tenant_id = $1 AND accepted_at < $2
				AND status NOT IN ('` + string(herald.NotificationQueued) + `', '` + string(herald.NotificationScheduled) + `', '` + string(herald.NotificationSending) + `')
				-- A notification scheduled far ahead keeps its history for the whole
				-- retention after it ended, not after it was accepted.
				AND updated_at < $2
				-- An open or redriving dead letter keeps its notification (it is
				-- deleted with it, below).
				AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.tenant_id = $1 AND d.notification_id = notifications.id
					AND d.status IN ('` + DeadLetterOpen + `', '` + DeadLetterRedriving + `'))
				LIMIT $3) x
			WHERE n.tenant_id = $1 AND n.id = x.id AND n.accepted_at = x.accepted_at
			RETURNING n.id, n.accepted_at
		), d AS (
			DELETE FROM deliveries d USING n WHERE d.tenant_id = $1 AND d.notification_id = n.id AND d.accepted_at = n.accepted_at
		), a AS (
			DELETE FROM delivery_attempts a USING n WHERE a.tenant_id = $1 AND a.notification_id = n.id
		), r AS (
			DELETE FROM provider_receipts r USING n WHERE r.tenant_id = $1 AND r.notification_id = n.id
		), l AS (
			DELETE FROM dead_letters l USING n WHERE l.tenant_id = $1 AND l.notification_id = n.id
		), numbers AS (
			DELETE FROM notification_sequences s USING n WHERE s.tenant_id = $1 AND s.notification_id = n.id
		)
		SELECT count(*) FROM n`,
	PruneReceipts: `DELETE FROM provider_receipts WHERE tenant_id = $1 AND id IN (
			SELECT id FROM provider_receipts WHERE tenant_id = $1 AND received_at < $2 LIMIT $3)`,
	PruneOldDeadLetters: `DELETE FROM dead_letters WHERE tenant_id = $1 AND id IN (
			SELECT id FROM dead_letters l WHERE tenant_id = $1 AND created_at < $2
			AND NOT EXISTS (SELECT 1 FROM notifications n WHERE n.tenant_id = $1 AND n.id = l.notification_id) LIMIT $3)`,
	PruneSequences: `DELETE FROM notification_sequences s USING (
			SELECT notification_id FROM notification_sequences WHERE tenant_id = $1 AND assigned_at < $2 LIMIT $3) x
		WHERE s.tenant_id = $1 AND s.notification_id = x.notification_id`,
	PruneLedger: `DELETE FROM notification_dedup d USING (
			SELECT notification_id FROM notification_dedup WHERE tenant_id = $1 AND dedup_until < $2 LIMIT $3) x
		WHERE d.tenant_id = $1 AND d.notification_id = x.notification_id`,
	PruneCapLedger: `DELETE FROM cap_ledger c USING (
			SELECT notification_id FROM cap_ledger WHERE tenant_id = $1 AND claimed_at < $2 LIMIT $3) x
		WHERE c.tenant_id = $1 AND c.notification_id = x.notification_id`,
	PruneSandbox: `DELETE FROM sandbox_messages WHERE tenant_id = $1 AND id IN (
			SELECT id FROM sandbox_messages WHERE tenant_id = $1 AND created_at < $2 LIMIT $3)`,
	PruneWebhookAttempts: `DELETE FROM webhook_attempts WHERE tenant_id = $1 AND id IN (
			SELECT id FROM webhook_attempts WHERE tenant_id = $1 AND at < $2 LIMIT $3)`,
	PruneWebhookMessages: `DELETE FROM webhook_messages WHERE tenant_id = $1 AND id IN (
			SELECT id FROM webhook_messages WHERE tenant_id = $1 AND created_at < $2 AND status <> '` + WebhookPending + `' LIMIT $3)`,
	PruneDeadLetters: `DELETE FROM dead_letters WHERE tenant_id = $1 AND id IN (
			SELECT id FROM dead_letters WHERE tenant_id = $1 AND status = '` + DeadLetterRedriven + `' AND updated_at < $2 LIMIT $3)`,
	PruneAudit: `DELETE FROM audit_log a USING (
			SELECT id FROM audit_log WHERE tenant_id = $1 AND at < $2 LIMIT $3) x
		WHERE a.tenant_id = $1 AND a.id = x.id`,
	PruneCampaigns: `DELETE FROM campaigns c USING (
			SELECT id FROM campaigns WHERE tenant_id = $1 AND finished_at < $2 LIMIT $3) x
		WHERE c.tenant_id = $1 AND c.id = x.id`,
	PruneInboxEvents: `DELETE FROM inbox_events e USING (
			SELECT user_id, seq FROM inbox_events WHERE tenant_id = $1 AND created_at < $2 LIMIT $3) x
		WHERE e.tenant_id = $1 AND e.user_id = x.user_id AND e.seq = x.seq`,
	PruneOrderHandoffs: pruneOrderHandoffsSQL,
	PruneOrderLanes:    pruneOrderLanesSQL,
}

// PruneKinds lists every kind Prune deletes, in the order a run takes them
// (webhook attempts before their messages).
var PruneKinds = []PruneKind{PruneNotifications, PruneReceipts, PruneOldDeadLetters, PruneSequences, PruneLedger, PruneCapLedger,
	PruneSandbox, PruneWebhookAttempts, PruneWebhookMessages, PruneDeadLetters, PruneAudit, PruneCampaigns, PruneInboxEvents,
	PruneOrderHandoffs, PruneOrderLanes}

// Prune deletes up to limit of the tenant's rows of kind older than cutoff
// and returns how many it deleted (fewer than limit: none are left).
func (s *Store) Prune(ctx context.Context, kind PruneKind, tenantID string, cutoff time.Time, limit int) (int64, error) {
	q, ok := pruneSQL[kind]
	if !ok {
		return 0, fmt.Errorf("no such prune kind %q", kind)
	}
	if kind == PruneNotifications { // a WITH … SELECT count(*)
		var n int64
		if err := s.db.QueryRow(ctx, q, tenantID, cutoff, limit).Scan(&n); err != nil {
			return 0, fmt.Errorf("prune %s of tenant %s: %w", kind, tenantID, err)
		}
		return n, nil
	}
	tag, err := s.db.Exec(ctx, q, tenantID, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("prune %s of tenant %s: %w", kind, tenantID, err)
	}
	return tag.RowsAffected(), nil
}

// TenantRetention is one tenant's own retention settings.
type TenantRetention struct {
	TenantID  string
	Retention retention.Tenant
}

// TenantRetentions returns every tenant with its own retention settings
// (zero when it has none), by tenant id, from the tenant id from on
// (inclusive; "" from the start), at most limit.
func (s *Store) TenantRetentions(ctx context.Context, from string, limit int) ([]TenantRetention, error) {
	rows, err := s.db.Query(ctx, `
		SELECT t.id, COALESCE(s.retention, '{}') FROM tenants t LEFT JOIN tenant_settings s ON s.tenant_id = t.id
		WHERE t.id >= $1 ORDER BY t.id LIMIT $2`, from, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (TenantRetention, error) {
		var tr TenantRetention
		var raw []byte
		if err := r.Scan(&tr.TenantID, &raw); err != nil {
			return tr, err
		}
		return tr, json.Unmarshal(raw, &tr.Retention)
	})
}

// MaintenanceRun is the record of one maintenance run.
type MaintenanceRun struct {
	ID         int64           `json:"id"`
	WorkflowID string          `json:"workflow_id"`
	RunID      string          `json:"run_id"`
	StartedAt  time.Time       `json:"started_at"`
	FinishedAt time.Time       `json:"finished_at"`
	Report     json.RawMessage `json:"report"`
}

// RecordMaintenanceRun writes a run's report (the operator's audit of what
// maintenance did; each tenant's own share is in its audit log).
func (s *Store) RecordMaintenanceRun(ctx context.Context, r MaintenanceRun) error {
	_, err := s.db.Exec(ctx, `INSERT INTO maintenance_runs (workflow_id, run_id, started_at, report) VALUES ($1, $2, $3, $4)`,
		r.WorkflowID, r.RunID, r.StartedAt, r.Report)
	return err
}

// LastMaintenanceInboxCap is the operator's inbox cap the last recorded run
// applied (its report's inbox_items); recorded is false when no run recorded
// one (no run yet, or only runs of a release before the reports held it: the
// cap may have been lowered in the same deploy).
func (s *Store) LastMaintenanceInboxCap(ctx context.Context) (inboxCap int, recorded bool, err error) {
	err = s.db.QueryRow(ctx, `SELECT (report->>'inbox_items')::int FROM maintenance_runs WHERE report ? 'inbox_items'
		ORDER BY id DESC LIMIT 1`).Scan(&inboxCap)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return inboxCap, err == nil, err
}

// LatestMaintenanceRuns returns the newest runs first, at most limit.
func (s *Store) LatestMaintenanceRuns(ctx context.Context, limit int) ([]MaintenanceRun, error) {
	rows, err := s.db.Query(ctx, `SELECT id, workflow_id, run_id, started_at, finished_at, report FROM maintenance_runs
		ORDER BY started_at DESC, id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (MaintenanceRun, error) {
		var m MaintenanceRun
		err := r.Scan(&m.ID, &m.WorkflowID, &m.RunID, &m.StartedAt, &m.FinishedAt, &m.Report)
		return m, err
	})
}

// PruneInboxAge deletes the tenant's inbox items created before cutoff, for up
// to users users at a time, each under its inbox state lock with its counts
// kept and an InboxItemsRemoved event (so open streams update). It returns how
// many items it deleted and whether to call again (false once no user had
// any).
//
// The users to visit are found by their inbox_state row's oldest_at, a lower
// bound of their items' created_at (migration 0171: one index entry per user
// instead of one per item, ~70 bytes an inbox item): the inbox write lowers it
// to a new item older than it, a visit here sets it to the oldest item left
// ('infinity': none). '-infinity', the column's default, is unknown (a row
// from before 0171, or written without it): visited once. Items that go
// otherwise (the cap, the user's own removals) leave the bound lower than it
// could be, never higher, so a user with an old item is always found; one
// found with none left is visited once and its bound set right.
func (s *Store) PruneInboxAge(ctx context.Context, tenantID string, cutoff time.Time, users int) (deleted int64, more bool, err error) {
	rows, err := s.db.Query(ctx, `
		SELECT user_id FROM (
			SELECT user_id FROM inbox_state WHERE tenant_id = $1 AND oldest_at < $2 LIMIT $3) x
		ORDER BY user_id`, tenantID, cutoff, users)
	if err != nil {
		return 0, false, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(ids) == 0 {
		return 0, false, err
	}
	err = s.removeInboxUsers(ctx, tenantID, ids, func(tx *Store) ([]removedInboxItem, error) {
		removed, err := tx.removeInboxItems(ctx, `
			DELETE FROM inbox WHERE tenant_id = $1 AND user_id = ANY($2) AND created_at < $3
			RETURNING tenant_id, user_id, notification_id, read_at, seen_at, archived_at`, tenantID, ids, cutoff)
		if err != nil {
			return nil, err
		}
		// Under the users' state locks: no item is added meanwhile.
		_, err = tx.db.Exec(ctx, `
			UPDATE inbox_state s SET oldest_at = coalesce(
				(SELECT min(i.created_at) FROM inbox i WHERE i.tenant_id = s.tenant_id AND i.user_id = s.user_id), 'infinity')
			WHERE s.tenant_id = $1 AND s.user_id = ANY($2)`, tenantID, ids)
		return removed, err
	}, &deleted)
	// Other users may hold old items still: the next call says (none: false).
	return deleted, true, err
}

// PruneInboxCaps applies the inbox cap (capInboxSQL) to up to users of the
// tenant's users after the user id after, in user id order, deleting at most
// rows items in all (one user may take them all). It returns the cursor of
// the following call and whether there is one (false once the walk is over):
// past the page, or back at the user it stopped inside. The insert path keeps
// every inbox within the cap it has at that moment, less what a write may
// leave of a cap made smaller (InboxCapPerWrite): the walk is for those.
func (s *Store) PruneInboxCaps(ctx context.Context, tenantID, after string, users, rows int) (deleted int64, next string, more bool, err error) {
	res, err := s.db.Query(ctx, `SELECT user_id FROM inbox_state WHERE tenant_id = $1 AND user_id > $2 ORDER BY user_id LIMIT $3`,
		tenantID, after, users)
	if err != nil {
		return 0, "", false, err
	}
	ids, err := pgx.CollectRows(res, pgx.RowTo[string])
	if err != nil || len(ids) == 0 {
		return 0, "", false, err
	}
	tenants := make([]string, len(ids))
	for i := range tenants {
		tenants[i] = tenantID
	}
	last := -1 // the position in ids of the last user it deleted from
	err = s.removeInboxUsers(ctx, tenantID, ids, func(tx *Store) ([]removedInboxItem, error) {
		removed, err := tx.capInboxes(ctx, tenants, ids, rows, rows)
		for _, r := range removed {
			last = max(last, slices.Index(ids, r.key.userID))
		}
		return removed, err
	}, &deleted)
	if err != nil {
		return deleted, "", false, err
	}
	if deleted == int64(rows) {
		// The batch ended inside the last user it deleted from (or at its
		// end): the next call starts at that user again.
		if last == 0 {
			return deleted, after, true, nil
		}
		return deleted, ids[last-1], true, nil
	}
	if len(ids) == users {
		return deleted, ids[len(ids)-1], true, nil
	}
	return deleted, "", false, nil
}

// removeInboxUsers locks the users' inbox states (ids sorted), runs remove,
// and keeps the counts, events and stream wake-ups of what it removed.
func (s *Store) removeInboxUsers(ctx context.Context, tenantID string, ids []string, remove func(*Store) ([]removedInboxItem, error), deleted *int64) error {
	return s.InTx(ctx, func(tx *Store) error {
		tenants := make([]string, len(ids))
		for i := range tenants {
			tenants[i] = tenantID
		}
		states, err := tx.lockInboxStates(ctx, tenants, ids, true)
		if err != nil {
			return err
		}
		users := make(map[userKey]*inboxState, len(ids))
		for i, id := range ids {
			users[userKey{tenantID, id}] = &states[i]
		}
		removed, err := remove(tx)
		if err != nil || len(removed) == 0 {
			return err
		}
		*deleted = int64(len(removed))
		events, evUsers := applyInboxRemovals(removed, users, func(removedInboxItem) bool { return true })
		if err := tx.appendInboxEvents(ctx, evUsers, events); err != nil {
			return err
		}
		var changed []userKey
		var changedStates []inboxState
		for _, id := range ids {
			if st := users[userKey{tenantID, id}]; st.changed {
				changed = append(changed, userKey{tenantID, id})
				changedStates = append(changedStates, *st)
			}
		}
		if err := tx.saveInboxStates(ctx, changed, changedStates); err != nil {
			return err
		}
		return tx.notifyInbox(ctx, changed)
	})
}
