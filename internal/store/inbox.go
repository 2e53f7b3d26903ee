package store

import (
	"context"
	"time"

	"github.com/herald-notify/herald/internal/herald"
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
