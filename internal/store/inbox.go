package store

import (
	"context"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/jackc/pgx/v5"
)

// InboxItem is one notification in a user's in-app inbox.
type InboxItem struct {
	NotificationID string     `json:"notification_id"`
	Title          string     `json:"title"`
	Body           string     `json:"body"`
	ActionURL      *string    `json:"action_url"`
	CreatedAt      time.Time  `json:"created_at"`
	ReadAt         *time.Time `json:"read_at"`
	SeenAt         *time.Time `json:"seen_at"`
	ArchivedAt     *time.Time `json:"archived_at"`
}

// DeliverToInbox stores the inbox row and marks the in_app channel delivered, in one
// transaction. A second call for the same notification is a no-op that returns
// inserted=false: the (tenant, user, notification) key is the in-app delivery guard.
func (s *Store) DeliverToInbox(ctx context.Context, tenantID, userID, notificationID, title, body, actionURL string, at time.Time) (inserted bool, err error) {
	err = s.InTx(ctx, func(tx *Store) error {
		tag, err := tx.db.Exec(ctx, `
			INSERT INTO inbox (tenant_id, user_id, notification_id, title, body, action_url, created_at)
			VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), $7) ON CONFLICT DO NOTHING`,
			tenantID, userID, notificationID, title, body, actionURL, at)
		if err != nil {
			return err
		}
		inserted = tag.RowsAffected() == 1
		provider := "inbox"
		_, err = tx.UpdateDelivery(ctx, tenantID, notificationID, herald.ChannelInApp, DeliveryUpdate{
			Status: herald.DeliveryDelivered, Provider: &provider, CountAttempt: inserted,
		})
		return err
	})
	return inserted, err
}

// InboxCursor is the keyset position after which the next page starts.
type InboxCursor struct {
	CreatedAt      time.Time
	NotificationID string
}

// InboxQuery selects a page of a user's inbox, newest first.
type InboxQuery struct {
	TenantID   string
	UserID     string
	Limit      int
	UnreadOnly bool
	After      *InboxCursor
}

// ListInbox returns up to q.Limit items and whether more follow.
func (s *Store) ListInbox(ctx context.Context, q InboxQuery) (items []InboxItem, more bool, err error) {
	args := []any{q.TenantID, q.UserID, q.Limit + 1}
	where := ""
	if q.UnreadOnly {
		where += " AND read_at IS NULL"
	}
	if q.After != nil {
		args = append(args, q.After.CreatedAt, q.After.NotificationID)
		where += " AND (created_at, notification_id) < ($4, $5)"
	}
	rows, err := s.db.Query(ctx, `
		SELECT notification_id, title, body, action_url, created_at, read_at, seen_at, archived_at
		FROM inbox WHERE tenant_id = $1 AND user_id = $2 AND archived_at IS NULL`+where+`
		ORDER BY created_at DESC, notification_id DESC LIMIT $3`, args...)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var it InboxItem
		if err := rows.Scan(&it.NotificationID, &it.Title, &it.Body, &it.ActionURL, &it.CreatedAt, &it.ReadAt, &it.SeenAt, &it.ArchivedAt); err != nil {
			return nil, false, err
		}
		items = append(items, it)
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	if len(items) > q.Limit {
		return items[:q.Limit], true, nil
	}
	return items, false, nil
}

// CountInbox counts a user's inbox rows for one notification (tests and audits).
func (s *Store) CountInbox(ctx context.Context, tenantID, userID, notificationID string) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, `SELECT count(*) FROM inbox WHERE tenant_id = $1 AND user_id = $2 AND notification_id = $3`,
		tenantID, userID, notificationID).Scan(&n)
	return n, err
}

// MarkInboxRead sets read_at (and seen_at) once; reading twice keeps the first time.
func (s *Store) MarkInboxRead(ctx context.Context, tenantID, userID, notificationID string) (InboxItem, error) {
	var it InboxItem
	err := s.db.QueryRow(ctx, `
		UPDATE inbox SET read_at = COALESCE(read_at, now()), seen_at = COALESCE(seen_at, now())
		WHERE tenant_id = $1 AND user_id = $2 AND notification_id = $3
		RETURNING notification_id, title, body, action_url, created_at, read_at, seen_at, archived_at`,
		tenantID, userID, notificationID).
		Scan(&it.NotificationID, &it.Title, &it.Body, &it.ActionURL, &it.CreatedAt, &it.ReadAt, &it.SeenAt, &it.ArchivedAt)
	return it, notFound(err)
}

// CountInboxForTemplate counts a tenant's inbox rows of one template (load tests).
func (s *Store) CountInboxForTemplate(ctx context.Context, tenantID, templateID string) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, `
		SELECT count(*) FROM inbox i JOIN notifications n ON n.tenant_id = i.tenant_id AND n.id = i.notification_id
		WHERE i.tenant_id = $1 AND n.template_id = $2`, tenantID, templateID).Scan(&n)
	return n, err
}

// InboxBatchItem is one rendered in-app message of DeliverToInboxBatch.
type InboxBatchItem struct {
	UserID         string
	NotificationID string
	Title          string
	Body           string
	ActionURL      string
}

// DeliverToInboxBatch is DeliverToInbox for many notifications at once (a
// campaign page): the inbox rows in one INSERT … ON CONFLICT DO NOTHING (the
// inbox key is the in-app guard, so a re-run inserts nothing) and every in_app
// delivery marked delivered, in one transaction. It returns how many rows were
// new.
func (s *Store) DeliverToInboxBatch(ctx context.Context, tenantID string, items []InboxBatchItem, at time.Time) (inserted int, err error) {
	if len(items) == 0 {
		return 0, nil
	}
	cols := make([][]string, 5)
	for _, it := range items {
		for j, v := range []string{it.UserID, it.NotificationID, it.Title, it.Body, it.ActionURL} {
			cols[j] = append(cols[j], v)
		}
	}
	err = s.InTx(ctx, func(tx *Store) error {
		rows, err := tx.db.Query(ctx, `
			INSERT INTO inbox (tenant_id, user_id, notification_id, title, body, action_url, created_at)
			SELECT $1, u, n, t, b, NULLIF(a, ''), $7 FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) AS x(u, n, t, b, a)
			ON CONFLICT DO NOTHING RETURNING notification_id`, tenantID, cols[0], cols[1], cols[2], cols[3], cols[4], at)
		if err != nil {
			return err
		}
		fresh, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		inserted = len(fresh)
		isNew := make(map[string]bool, len(fresh))
		for _, id := range fresh {
			isNew[id] = true
		}
		us := make([]BulkDeliveryUpdate, len(items))
		for i, it := range items {
			us[i] = BulkDeliveryUpdate{NotificationID: it.NotificationID, Channel: herald.ChannelInApp, Status: herald.DeliveryDelivered, Provider: "inbox"}
			if isNew[it.NotificationID] {
				us[i].Attempts = 1
			}
		}
		return tx.UpdateDeliveries(ctx, tenantID, us)
	})
	return inserted, err
}
