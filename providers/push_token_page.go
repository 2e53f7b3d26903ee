package providers

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// PushTokenCursor is the (created_at, token) of the last token of a page.
type PushTokenCursor struct {
	CreatedAt time.Time
	Token     string
}

// PushTokenPage lists at most limit of a user's tokens, oldest first (created_at,
// then token), starting after after (nil: the first page). It is keyset paginated,
// so a page costs O(limit) however many tokens the user registered. A token
// registered meanwhile (new, or moved here from another user: PutPushToken sets
// its created_at then) sorts after every earlier one, so no token already listed
// repeats — unless it left this user and came back while the client paged, when
// it is listed again as the new registration it is. (PushTokens, for delivery,
// still reads them all.)
func (s *Store) PushTokenPage(ctx context.Context, tenantID, userID string, after *PushTokenCursor, limit int) ([]PushToken, error) {
	var afterAt *time.Time
	var afterToken string
	if after != nil {
		afterAt, afterToken = &after.CreatedAt, after.Token
	}
	rows, err := s.db.Query(ctx, `SELECT tenant_id, user_id, token, platform, created_at, last_seen_at
		FROM push_tokens WHERE tenant_id = $1 AND user_id = $2
		  AND ($3::timestamptz IS NULL OR (created_at, token) > ($3, $4))
		ORDER BY created_at, token LIMIT $5`, tenantID, userID, afterAt, afterToken, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanPushToken)
}
