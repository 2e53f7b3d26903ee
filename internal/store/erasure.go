package store

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/herald"
)

// User erasure (DELETE /v1/users/{user_id}, docs/erasure.md). What the user is
// (profile, preferences, push tokens, subscriptions, memberships, inbox, digests,
// waiters) is deleted; what Herald did for them (notifications, deliveries,
// attempts, flow runs, dead letters, webhook messages) is kept for the tenant's
// counts with the user id replaced by ErasedUserID and the addresses and
// rendered content removed. Everything runs in bounded batches (EraseBatch rows
// a statement), each its own transaction, so a user with a million inbox items
// never holds one long transaction; the progress row user_erasures makes a
// retried DELETE resume where a crash stopped it. Every statement filters by
// tenant_id first and addresses rows by (tableoid, ctid), never by a primary
// key's name, so it works on partitioned tables too.

// EraseBatch is the rows one erasure statement touches at most.
const EraseBatch = 1000

// ErasedUserID is the stable anonymous id that replaces an erased user's id in
// the rows kept for counts: "erased_" and 32 hex digits of HMAC-SHA256(key,
// tenant id, user id). The same user of the same tenant always gets the same
// id; without key it cannot be reversed by guessing ids.
func ErasedUserID(key []byte, tenantID, userID string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(tenantID))
	m.Write([]byte{0})
	m.Write([]byte(userID))
	return "erased_" + hex.EncodeToString(m.Sum(nil)[:16])
}

// ErasureKeyFrom derives the key of ErasedUserID from a process secret (the
// user token key, itself derived from HERALD_SECRETS_KEY): every API and
// worker process with the same secrets key computes the same anonymous ids.
func ErasureKeyFrom(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("herald user erasure v1"))
	return m.Sum(nil)
}

// ErasureResult says what an erasure did, per table: rows deleted and rows
// kept but anonymised (user id replaced, addresses and content removed).
type ErasureResult struct {
	ErasedID   string           `json:"erased_id"`
	Deleted    map[string]int64 `json:"deleted"`
	Anonymised map[string]int64 `json:"anonymised"`
	// Resumed: an earlier erasure of this user had stopped part-way.
	Resumed bool `json:"resumed"`
	// Statements is how many bounded statements ran.
	Statements int `json:"statements"`
}

type erasure struct {
	tenantID, userID, erasedID string
	email, phone               *string
	batch                      int
	res                        *ErasureResult
}

// EraseUser erases the tenant's user (see the top of the file). It answers
// herald.ErrNotFound when the tenant has no such user and no erasure of it is
// under way. batch <= 0 means EraseBatch.
func (s *Store) EraseUser(ctx context.Context, tenantID, userID, erasedID string, batch int) (ErasureResult, error) {
	if batch <= 0 {
		batch = EraseBatch
	}
	res := ErasureResult{ErasedID: erasedID, Deleted: map[string]int64{}, Anonymised: map[string]int64{}}
	e := &erasure{tenantID: tenantID, userID: userID, erasedID: erasedID, batch: batch, res: &res}
	if err := s.beginErasure(ctx, e); err != nil {
		return res, err
	}
	steps := []func(context.Context, *Store) error{
		// The tables whose rows reference the profile (and would go with it).
		e.perUser("inbox"), e.perUser("inbox_events"), e.perUser("inbox_state"), e.perUser("push_tokens"),
		e.perUser("topic_subscribers"), e.perUser("user_preferences"),
		e.deleteProfile,
		// The rest, now that nothing new can be delivered to the user.
		e.perUser("recipient_list_members"), e.perUser("cap_ledger"), e.perUser("flow_waiters"),
		// The user's numbers before their counter: a number the accept path took
		// for a run that never recorded its notification names the user too, and
		// a re-created user starts counting at 1 again.
		e.perUser("notification_sequences"), e.perUser("due_sequences"),
		e.perUser("digest_events"), e.perUser("digests"),
		e.campaignPending, e.notifications, e.flowRuns, e.listSamples, e.auditLog,
		// The user's ordered-delivery lanes (their hand-offs go with them): the
		// user's notifications have ended or end suppressed, so none waits.
		e.perUser("order_lanes"),
	}
	for _, step := range steps {
		if err := step(ctx, s); err != nil {
			return res, err
		}
	}
	tag, err := s.db.Exec(ctx, `DELETE FROM user_erasures WHERE tenant_id = $1 AND user_id = $2`, tenantID, userID)
	if err != nil {
		return res, err
	}
	res.Deleted["user_erasures"] += tag.RowsAffected()
	return res, nil
}

// beginErasure records the erasure (with the addresses the later batches
// scrub) before anything is deleted, so a crash part-way leaves a row a retry
// resumes from.
func (s *Store) beginErasure(ctx context.Context, e *erasure) error {
	return s.InTx(ctx, func(tx *Store) error {
		err := tx.db.QueryRow(ctx, `SELECT email, phone FROM users WHERE tenant_id = $1 AND user_id = $2 FOR UPDATE`,
			e.tenantID, e.userID).Scan(&e.email, &e.phone)
		var prior bool
		if errors.Is(err, pgx.ErrNoRows) {
			err = tx.db.QueryRow(ctx, `SELECT email, phone FROM user_erasures WHERE tenant_id = $1 AND user_id = $2 FOR UPDATE`,
				e.tenantID, e.userID).Scan(&e.email, &e.phone)
			if errors.Is(err, pgx.ErrNoRows) {
				return herald.ErrNotFound
			}
			prior = true
		}
		if err != nil {
			return err
		}
		tag, err := tx.db.Exec(ctx, `
			INSERT INTO user_erasures (tenant_id, user_id, erased_id, email, phone) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (tenant_id, user_id) DO NOTHING`,
			e.tenantID, e.userID, e.erasedID, e.email, e.phone)
		e.res.Resumed = prior || tag.RowsAffected() == 0
		e.res.Statements += 2
		return err
	})
}

// deleteProfile deletes the user's row, once the tables that reference it
// (and would be deleted with it, in one unbounded transaction) have been
// emptied in batches: the cascade now removes only what concurrent deliveries
// added meanwhile. From here no delivery can start for the user (the workflow
// finds the profile gone, the inbox's foreign key refuses a row). The user's
// tokens are revoked under the anonymous id: a token minted before the
// erasure stays refused even if the tenant later creates a user of the same id.
func (e *erasure) deleteProfile(ctx context.Context, s *Store) error {
	return s.InTx(ctx, func(tx *Store) error {
		tag, err := tx.db.Exec(ctx, `DELETE FROM users WHERE tenant_id = $1 AND user_id = $2`, e.tenantID, e.userID)
		if err != nil {
			return err
		}
		e.res.Deleted["users"] += tag.RowsAffected()
		tag, err = tx.db.Exec(ctx, `DELETE FROM inbox_token_revocations WHERE tenant_id = $1 AND user_id = $2`, e.tenantID, e.userID)
		if err != nil {
			return err
		}
		e.res.Deleted["inbox_token_revocations"] += tag.RowsAffected()
		_, err = tx.db.Exec(ctx, `
			INSERT INTO inbox_token_revocations (tenant_id, user_id, not_before) VALUES ($1, $2, clock_timestamp())
			ON CONFLICT (tenant_id, user_id) DO UPDATE SET not_before = EXCLUDED.not_before`, e.tenantID, e.erasedID)
		e.res.Statements += 3
		return err
	})
}

// loop runs stmt until it touches fewer than a batch of rows, adding the rows
// to counts[table].
func (e *erasure) loop(ctx context.Context, s *Store, counts map[string]int64, table, stmt string, args ...any) error {
	for {
		tag, err := s.db.Exec(ctx, stmt, args...)
		if err != nil {
			return fmt.Errorf("erasing %s: %w", table, err)
		}
		e.res.Statements++
		counts[table] += tag.RowsAffected()
		if tag.RowsAffected() < int64(e.batch) {
			return nil
		}
	}
}

// perUser deletes the table's rows of the user, a batch at a time.
func (e *erasure) perUser(table string) func(context.Context, *Store) error {
	return func(ctx context.Context, s *Store) error {
		return e.loop(ctx, s, e.res.Deleted, table, `
			DELETE FROM `+table+` WHERE (tableoid, ctid) IN (
				SELECT tableoid, ctid FROM `+table+` WHERE tenant_id = $1 AND user_id = $2 LIMIT $3)`,
			e.tenantID, e.userID, e.batch)
	}
}

// campaignPending ends the user's owed campaign channels suppressed with
// herald.ReasonUserDeleted (the campaign counts them so) and drops the owed rows.
func (e *erasure) campaignPending(ctx context.Context, s *Store) error {
	for {
		var ids []string
		err := s.InTx(ctx, func(tx *Store) error {
			rows, err := tx.db.Query(ctx, `
				WITH p AS (
					DELETE FROM campaign_pending WHERE (tableoid, ctid) IN (
						SELECT tableoid, ctid FROM campaign_pending WHERE tenant_id = $1 AND user_id = $2 LIMIT $3)
					RETURNING notification_id, channel)
				UPDATE deliveries d SET status = $4, reason = $5, last_error = NULL, updated_at = now()
				FROM p WHERE d.tenant_id = $1 AND d.notification_id = p.notification_id AND d.channel = p.channel
				RETURNING d.notification_id`,
				e.tenantID, e.userID, e.batch, herald.DeliverySuppressed, herald.ReasonUserDeleted)
			if err != nil {
				return err
			}
			ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			return tx.RecomputeNotificationStatuses(ctx, e.tenantID, ids)
		})
		if err != nil {
			return fmt.Errorf("erasing campaign_pending: %w", err)
		}
		e.res.Statements += 2
		e.res.Deleted["campaign_pending"] += int64(len(ids))
		if len(ids) < e.batch {
			return nil
		}
	}
}

// notifications anonymises the user's notifications a batch at a time, with
// what hangs off them: the sandbox's copies are deleted, dead letters lose
// their payload (addresses and rendered content), attempts, deliveries and
// receipts their error texts (a provider's error may quote the address),
// webhook messages the error in their payload, and the cap ledger its claims.
func (e *erasure) notifications(ctx context.Context, s *Store) error {
	for {
		var n int
		err := s.InTx(ctx, func(tx *Store) error {
			rows, err := tx.db.Query(ctx, `
				SELECT id FROM notifications WHERE tenant_id = $1 AND user_id = $2 LIMIT $3 FOR UPDATE`,
				e.tenantID, e.userID, e.batch)
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			n = len(ids)
			if n == 0 {
				return nil
			}
			for _, st := range []struct {
				table   string
				deleted bool
				sql     string
			}{
				{"sandbox_messages", true, `DELETE FROM sandbox_messages WHERE tenant_id = $1 AND notification_id = ANY($2)`},
				{"cap_ledger", true, `DELETE FROM cap_ledger WHERE tenant_id = $1 AND notification_id = ANY($2)`},
				// The due order of inbox items that are gone.
				{"notification_sequences", true, `DELETE FROM notification_sequences WHERE tenant_id = $1 AND notification_id = ANY($2)`},
				{"dead_letters", false, `UPDATE dead_letters SET payload = '{}'::jsonb, last_error = NULL
					WHERE tenant_id = $1 AND notification_id = ANY($2)`},
				{"delivery_attempts", false, `UPDATE delivery_attempts SET error = NULL
					WHERE tenant_id = $1 AND notification_id = ANY($2) AND error IS NOT NULL`},
				{"deliveries", false, `UPDATE deliveries SET last_error = NULL
					WHERE tenant_id = $1 AND notification_id = ANY($2) AND last_error IS NOT NULL`},
				{"provider_receipts", false, `UPDATE provider_receipts SET reason = NULL
					WHERE tenant_id = $1 AND notification_id = ANY($2) AND reason IS NOT NULL`},
				{"webhook_messages", false, `UPDATE webhook_messages SET payload = payload #- '{data,error}'
					WHERE tenant_id = $1 AND notification_id = ANY($2) AND payload->'data' ? 'error'`},
			} {
				tag, err := tx.db.Exec(ctx, st.sql, e.tenantID, ids)
				if err != nil {
					return fmt.Errorf("erasing %s: %w", st.table, err)
				}
				if st.deleted {
					e.res.Deleted[st.table] += tag.RowsAffected()
				} else {
					e.res.Anonymised[st.table] += tag.RowsAffected()
				}
			}
			tag, err := tx.db.Exec(ctx, `UPDATE notifications SET user_id = $3, due_seq = NULL WHERE tenant_id = $1 AND id = ANY($2)`,
				e.tenantID, ids, e.erasedID)
			e.res.Anonymised["notifications"] += tag.RowsAffected()
			e.res.Statements += 10
			return err
		})
		if err != nil {
			return err
		}
		if n < e.batch {
			return nil
		}
	}
}

// flowRuns anonymises the user's flow runs and drops their throttle claims
// (counted windows of a bucket derived from the user id).
func (e *erasure) flowRuns(ctx context.Context, s *Store) error {
	return e.loop(ctx, s, e.res.Anonymised, "flow_runs", `
		WITH r AS (
			SELECT tableoid, ctid, notification_id FROM flow_runs WHERE tenant_id = $1 AND user_id = $2 LIMIT $3 FOR UPDATE),
		c AS (DELETE FROM flow_throttle_claims WHERE tenant_id = $1 AND notification_id IN (SELECT notification_id FROM r))
		UPDATE flow_runs SET user_id = $4 WHERE (tableoid, ctid) IN (SELECT tableoid, ctid FROM r)`,
		e.tenantID, e.userID, e.batch, e.erasedID)
}

// listSamples removes the user id from the unknown-id samples of the tenant's
// lists (a list uploaded before the user existed names it there).
func (e *erasure) listSamples(ctx context.Context, s *Store) error {
	tag, err := s.db.Exec(ctx, `
		UPDATE recipient_lists SET unknown_sample = array_remove(unknown_sample, $2)
		WHERE tenant_id = $1 AND $2 = ANY(unknown_sample)`, e.tenantID, e.userID)
	e.res.Statements++
	e.res.Anonymised["recipient_lists"] += tag.RowsAffected()
	return err
}

// auditLog replaces the user id, and the user's addresses, in the tenant's
// audit entries (targets such as "user_id=ada", request fields naming the
// user) with the anonymous id, walking the tenant's log in pages by id: a page
// is read by the (tenant_id, id) key, only its entries that mention one of the
// strings come back, and only those that changed are written.
func (e *erasure) auditLog(ctx context.Context, s *Store) error {
	needles := []string{e.userID}
	replace := []string{jsonString(e.userID), jsonString(e.erasedID)}
	for _, a := range []*string{e.email, e.phone} {
		if a != nil && *a != "" {
			needles = append(needles, *a)
			replace = append(replace, jsonString(*a), jsonString("erased"))
		}
	}
	r := strings.NewReplacer(replace...)
	last := int64(math.MinInt64)
	for {
		var n int
		var hi *int64
		if err := s.db.QueryRow(ctx, `
			SELECT count(*)::int, max(id) FROM (
				SELECT id FROM audit_log WHERE tenant_id = $1 AND id > $2 ORDER BY id LIMIT $3) p`,
			e.tenantID, last, e.batch).Scan(&n, &hi); err != nil {
			return fmt.Errorf("erasing audit_log: %w", err)
		}
		e.res.Statements++
		if n == 0 {
			return nil
		}
		rows, err := s.db.Query(ctx, `
			SELECT id, COALESCE(target, ''), details::text FROM audit_log
			WHERE tenant_id = $1 AND id > $2 AND id <= $3
			  AND EXISTS (SELECT 1 FROM unnest($4::text[]) x WHERE strpos(target, x) > 0 OR strpos(details::text, x) > 0)`,
			e.tenantID, last, *hi, needles)
		if err != nil {
			return fmt.Errorf("erasing audit_log: %w", err)
		}
		type hit struct {
			id      int64
			target  string
			details *string
		}
		hits, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (hit, error) {
			var h hit
			err := row.Scan(&h.id, &h.target, &h.details)
			return h, err
		})
		if err != nil {
			return fmt.Errorf("erasing audit_log: %w", err)
		}
		e.res.Statements++
		for _, h := range hits {
			parts := strings.Split(h.target, " ")
			for i, p := range parts {
				if p == "user_id="+e.userID {
					parts[i] = "user_id=" + e.erasedID
				}
			}
			target := strings.Join(parts, " ")
			details := h.details
			if details != nil {
				d := r.Replace(*details)
				details = &d
			}
			if target == h.target && (details == nil || *details == *h.details) {
				continue
			}
			if _, err := s.db.Exec(ctx, `UPDATE audit_log SET target = $3, details = $4::jsonb WHERE tenant_id = $1 AND id = $2`,
				e.tenantID, h.id, target, details); err != nil {
				return fmt.Errorf("erasing audit_log: %w", err)
			}
			e.res.Statements++
			e.res.Anonymised["audit_log"]++
		}
		last = *hi
		if n < e.batch {
			return nil
		}
	}
}

// jsonString is s as a JSON string the way PostgreSQL prints it in jsonb text
// (no HTML escaping).
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// AnonymiseNotificationUser replaces userID on one notification with erasedID:
// a notification recorded after its user's erasure (accepted just before it)
// is anonymised when its workflow finds the user gone.
func (s *Store) AnonymiseNotificationUser(ctx context.Context, tenantID, notificationID, userID, erasedID string) error {
	return s.InTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, `UPDATE notifications SET user_id = $4, due_seq = NULL WHERE tenant_id = $1 AND id = $2 AND user_id = $3`,
			tenantID, notificationID, userID, erasedID); err != nil {
			return err
		}
		if _, err := tx.db.Exec(ctx, `DELETE FROM notification_sequences WHERE tenant_id = $1 AND notification_id = $2`,
			tenantID, notificationID); err != nil {
			return err
		}
		_, err := tx.db.Exec(ctx, `
			DELETE FROM due_sequences d WHERE d.tenant_id = $1 AND d.user_id = $2
			AND NOT EXISTS (SELECT 1 FROM users u WHERE u.tenant_id = $1 AND u.user_id = $2)`, tenantID, userID)
		return err
	})
}

// NotificationRecipientGone reports whether the notification exists and its
// user does not (erased since acceptance). A notification row that does not
// exist answers false: the delivery guard decides then.
func (s *Store) NotificationRecipientGone(ctx context.Context, tenantID, notificationID string) (bool, error) {
	var gone bool
	err := s.db.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM notifications n WHERE n.tenant_id = $1 AND n.id = $2
			AND NOT EXISTS (SELECT 1 FROM users u WHERE u.tenant_id = n.tenant_id AND u.user_id = n.user_id))`,
		tenantID, notificationID).Scan(&gone)
	return gone, err
}
