package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/secrets"
)

// Store reads and writes provider_configs, push_tokens and provider_receipts.
// Every method takes the tenant and filters by it.
type Store struct {
	db   dbx.DB
	keys *secrets.Keyring
}

// NewStore wraps a pool or a transaction. keys seals and opens provider secrets;
// it may be nil for a Store that never touches them (push tokens, receipts).
func NewStore(db dbx.DB, keys *secrets.Keyring) *Store {
	return &Store{db: dbx.WithNotificationIDs(db), keys: keys}
}

// ProviderConfig is one provider configured for a tenant's channel.
type ProviderConfig struct {
	TenantID string
	Channel  herald.Channel
	Provider string
	// Priority orders several providers of a channel, lowest first.
	Priority int
	Enabled  bool
	// Settings are the non-secret settings as JSON (sender, project, webhook public
	// key). Safe to return from the API.
	Settings json.RawMessage
	// Secret is the plaintext credentials (JSON, provider-specific). Stored sealed;
	// never log it or return it from an endpoint. Put with a nil Secret keeps the
	// stored one.
	Secret []byte `json:"-"`
	// HasSecret reports whether credentials are stored.
	HasSecret bool
	// RatePerSecond caps this account's sends across all workers (0: no cap).
	RatePerSecond float64
	UpdatedAt     time.Time
}

// String leaves the secret out, so a config can be logged.
func (c ProviderConfig) String() string {
	return fmt.Sprintf("ProviderConfig{%s/%s/%s priority=%d enabled=%t settings=%s secret=[redacted]}",
		c.TenantID, c.Channel, c.Provider, c.Priority, c.Enabled, c.Settings)
}

func secretAAD(tenantID string, channel herald.Channel, provider string) []byte {
	return []byte("herald/provider_configs/" + tenantID + "/" + string(channel) + "/" + provider)
}

// PutProviderConfig inserts or replaces a tenant's provider config. The secret is
// sealed, bound to (tenant, channel, provider): copied to another row it does not
// open. A nil Secret keeps the stored secret.
func (s *Store) PutProviderConfig(ctx context.Context, c ProviderConfig) error {
	if c.TenantID == "" || c.Channel == "" || c.Provider == "" {
		return errors.New("providers: config needs tenant, channel and provider")
	}
	settings := c.Settings
	if len(settings) == 0 {
		settings = json.RawMessage(`{}`)
	}
	if !json.Valid(settings) {
		return errors.New("providers: settings are not valid JSON")
	}
	var sealed []byte
	if c.Secret != nil {
		if s.keys == nil {
			return errors.New("providers: no secrets keyring to seal provider credentials")
		}
		var err error
		if sealed, err = s.keys.Seal(c.Secret, secretAAD(c.TenantID, c.Channel, c.Provider)); err != nil {
			return err
		}
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO provider_configs (tenant_id, channel, provider, priority, enabled, config, secret_ciphertext, rate_per_second)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (tenant_id, channel, provider) DO UPDATE SET
			priority = EXCLUDED.priority,
			enabled = EXCLUDED.enabled,
			config = EXCLUDED.config,
			rate_per_second = EXCLUDED.rate_per_second,
			secret_ciphertext = COALESCE(EXCLUDED.secret_ciphertext, provider_configs.secret_ciphertext),
			updated_at = now()`,
		c.TenantID, c.Channel, c.Provider, c.Priority, c.Enabled, []byte(settings), sealed, c.RatePerSecond)
	return err
}

const configColumns = `tenant_id, channel, provider, priority, enabled, config, secret_ciphertext, updated_at, rate_per_second`

func (s *Store) scanConfig(row pgx.Row) (ProviderConfig, error) {
	var c ProviderConfig
	var settings, sealed []byte
	if err := row.Scan(&c.TenantID, &c.Channel, &c.Provider, &c.Priority, &c.Enabled, &settings, &sealed, &c.UpdatedAt, &c.RatePerSecond); err != nil {
		return c, dbx.NotFound(err)
	}
	c.Settings = settings
	if sealed != nil {
		c.HasSecret = true
		if s.keys == nil {
			return c, errors.New("providers: no secrets keyring to open provider credentials")
		}
		pt, err := s.keys.Open(sealed, secretAAD(c.TenantID, c.Channel, c.Provider))
		if err != nil {
			return c, fmt.Errorf("providers: credentials of %s/%s/%s: %w", c.TenantID, c.Channel, c.Provider, err)
		}
		c.Secret = pt
	}
	return c, nil
}

// GetProviderConfig reads one config with its secret opened.
func (s *Store) GetProviderConfig(ctx context.Context, tenantID string, channel herald.Channel, provider string) (ProviderConfig, error) {
	return s.scanConfig(s.db.QueryRow(ctx, `SELECT `+configColumns+` FROM provider_configs
		WHERE tenant_id = $1 AND channel = $2 AND provider = $3`, tenantID, channel, provider))
}

// ProviderConfigs returns a channel's enabled configs, lowest priority first, with
// secrets opened. None means the tenant uses the sandbox for that channel.
func (s *Store) ProviderConfigs(ctx context.Context, tenantID string, channel herald.Channel) ([]ProviderConfig, error) {
	rows, err := s.db.Query(ctx, `SELECT `+configColumns+` FROM provider_configs
		WHERE tenant_id = $1 AND channel = $2 AND enabled ORDER BY priority, provider`, tenantID, channel)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ProviderConfig
	for rows.Next() {
		c, err := s.scanConfig(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// DeleteProviderConfig removes a config; it reports whether one existed.
func (s *Store) DeleteProviderConfig(ctx context.Context, tenantID string, channel herald.Channel, provider string) (bool, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM provider_configs WHERE tenant_id = $1 AND channel = $2 AND provider = $3`,
		tenantID, channel, provider)
	return tag.RowsAffected() == 1, err
}

// Push token platforms.
const (
	PlatformAndroid = "android"
	PlatformIOS     = "ios"
	PlatformWeb     = "web"
)

// PushToken is one registered device.
type PushToken struct {
	TenantID   string    `json:"-"`
	UserID     string    `json:"user_id"`
	Token      string    `json:"token"`
	Platform   string    `json:"platform"`
	CreatedAt  time.Time `json:"created_at"`
	LastSeenAt time.Time `json:"last_seen_at"`
}

// DefaultPushTokensPerUser is HERALD_PUSH_TOKENS_PER_USER's default: how many
// device tokens one user keeps (a phone, a tablet, a few browsers, with room
// for reinstalls whose old token FCM has not reported dead yet).
const DefaultPushTokensPerUser = 10

// PutPushToken registers a device token for a user. Registering a token again
// refreshes it; registering it for another user of the tenant moves it (the device
// changed hands). The user must exist. The user keeps at most maxPerUser tokens
// (0: DefaultPushTokensPerUser): past it the least recently registered ones
// (oldest last_seen_at) are removed, in the same transaction, under the user's
// row lock so concurrent registrations cannot overshoot.
func (s *Store) PutPushToken(ctx context.Context, t PushToken, maxPerUser int) (PushToken, error) {
	switch t.Platform {
	case PlatformAndroid, PlatformIOS, PlatformWeb:
	default:
		return t, fmt.Errorf("providers: platform %q is not android, ios or web", t.Platform)
	}
	if t.Token == "" || t.UserID == "" || t.TenantID == "" {
		return t, errors.New("providers: push token needs tenant, user and token")
	}
	if maxPerUser <= 0 {
		maxPerUser = DefaultPushTokensPerUser
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return t, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	var one int
	if err := tx.QueryRow(ctx, `SELECT 1 FROM users WHERE tenant_id = $1 AND user_id = $2 FOR UPDATE`, t.TenantID, t.UserID).Scan(&one); err != nil {
		return t, dbx.NotFound(err)
	}
	err = tx.QueryRow(ctx, `
		INSERT INTO push_tokens (tenant_id, user_id, token, platform)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant_id, token) DO UPDATE SET
			user_id = EXCLUDED.user_id,
			platform = EXCLUDED.platform,
			created_at = CASE WHEN push_tokens.user_id = EXCLUDED.user_id THEN push_tokens.created_at ELSE now() END,
			last_seen_at = now()
		RETURNING created_at, last_seen_at`,
		t.TenantID, t.UserID, t.Token, t.Platform).Scan(&t.CreatedAt, &t.LastSeenAt)
	if err != nil {
		return t, err
	}
	if _, err := tx.Exec(ctx, `
		DELETE FROM push_tokens WHERE tenant_id = $1 AND user_id = $2 AND token IN (
			SELECT token FROM push_tokens WHERE tenant_id = $1 AND user_id = $2
			ORDER BY last_seen_at DESC, created_at DESC, token OFFSET $3)`, t.TenantID, t.UserID, maxPerUser); err != nil {
		return t, err
	}
	return t, tx.Commit(ctx)
}

// PushTokens lists a user's tokens, oldest first.
func (s *Store) PushTokens(ctx context.Context, tenantID, userID string) ([]PushToken, error) {
	rows, err := s.db.Query(ctx, `SELECT tenant_id, user_id, token, platform, created_at, last_seen_at
		FROM push_tokens WHERE tenant_id = $1 AND user_id = $2 ORDER BY created_at, token`, tenantID, userID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanPushToken)
}

// PushTokensOf lists the tokens of many users at once (a campaign chunk's
// push recipients): user id → tokens, oldest first, for the users that have any.
func (s *Store) PushTokensOf(ctx context.Context, tenantID string, userIDs []string) (map[string][]PushToken, error) {
	rows, err := s.db.Query(ctx, `SELECT tenant_id, user_id, token, platform, created_at, last_seen_at
		FROM push_tokens WHERE tenant_id = $1 AND user_id = ANY($2) ORDER BY user_id, created_at, token`, tenantID, userIDs)
	if err != nil {
		return nil, err
	}
	tokens, err := pgx.CollectRows(rows, scanPushToken)
	if err != nil {
		return nil, err
	}
	out := map[string][]PushToken{}
	for _, t := range tokens {
		out[t.UserID] = append(out[t.UserID], t)
	}
	return out, nil
}

// scanPushToken reads one row of "tenant_id, user_id, token, platform,
// created_at, last_seen_at", the columns PushTokens and PushTokenPage select.
func scanPushToken(r pgx.CollectableRow) (PushToken, error) {
	var t PushToken
	err := r.Scan(&t.TenantID, &t.UserID, &t.Token, &t.Platform, &t.CreatedAt, &t.LastSeenAt)
	return t, err
}

// DeletePushToken unregisters a user's token; it reports whether it existed.
func (s *Store) DeletePushToken(ctx context.Context, tenantID, userID, token string) (bool, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM push_tokens WHERE tenant_id = $1 AND user_id = $2 AND token = $3`,
		tenantID, userID, token)
	return tag.RowsAffected() == 1, err
}

// RemoveDeadPushToken deletes a token the provider declared dead (IsDeadToken),
// whoever it belongs to now; it reports whether it existed.
func (s *Store) RemoveDeadPushToken(ctx context.Context, tenantID, token string) (bool, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM push_tokens WHERE tenant_id = $1 AND token = $2`, tenantID, token)
	return tag.RowsAffected() == 1, err
}

// receiptRankSQL orders receipt statuses from least to most final.
const receiptRankSQL = `CASE status WHEN 'accepted' THEN 0 WHEN 'sent' THEN 1 WHEN 'deferred' THEN 2
	WHEN 'failed' THEN 3 WHEN 'delivered' THEN 4 ELSE 0 END`

// RecordReceipt stores a receipt that names its notification. It returns false,
// nil for a receipt that names no notification, names one the tenant does not
// have (unknown: ignore it, no retry storm), or repeats one already stored.
func (s *Store) RecordReceipt(ctx context.Context, r Receipt) (bool, error) {
	if !r.Named() {
		return false, nil
	}
	if r.OccurredAt.IsZero() {
		r.OccurredAt = time.Now()
	}
	tag, err := s.db.Exec(ctx, `
		INSERT INTO provider_receipts (tenant_id, notification_id, channel, provider, provider_message_id,
			status, provider_status, reason, event_id, occurred_at)
		SELECT $1, $2, $3, $4, $5, $6, $7, NULLIF($8, ''), NULLIF($9, ''), $10
		WHERE EXISTS (SELECT 1 FROM notifications WHERE tenant_id = $1 AND id = $2)
		ON CONFLICT (tenant_id, notification_id, channel, provider, provider_message_id, provider_status, occurred_at)
		DO NOTHING`,
		r.TenantID, r.NotificationID, r.Channel, r.Provider, r.ProviderMessageID, string(r.Status),
		r.ProviderStatus, r.Reason, r.EventID, r.OccurredAt)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// LatestReceipt returns the most final receipt recorded for (notification,
// channel) — delivered over failed over deferred over sent over accepted, then the
// latest — and whether there is any. Any receipt proves the provider accepted the
// message: the delivery guard checks this before calling the provider again.
func (s *Store) LatestReceipt(ctx context.Context, tenantID, notificationID string, channel herald.Channel) (Receipt, bool, error) {
	var r Receipt
	var status string
	var reason, eventID *string
	err := s.db.QueryRow(ctx, `
		SELECT tenant_id, notification_id, channel, provider, provider_message_id, status, provider_status,
			reason, event_id, occurred_at
		FROM provider_receipts WHERE tenant_id = $1 AND notification_id = $2 AND channel = $3
		ORDER BY `+receiptRankSQL+` DESC, occurred_at DESC, id DESC LIMIT 1`, tenantID, notificationID, channel).
		Scan(&r.TenantID, &r.NotificationID, &r.Channel, &r.Provider, &r.ProviderMessageID, &status, &r.ProviderStatus,
			&reason, &eventID, &r.OccurredAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Receipt{}, false, nil
	}
	if err != nil {
		return Receipt{}, false, err
	}
	r.Status = ReceiptStatus(status)
	if reason != nil {
		r.Reason = *reason
	}
	if eventID != nil {
		r.EventID = *eventID
	}
	return r, true, nil
}

// LatestReceipts is LatestReceipt for many notifications of one channel at
// once (a campaign batch's guard): notification id → its most final receipt,
// for those that have one.
//
// Each id is one probe of the receipts index (a lateral subquery with a LIMIT
// is never flattened), whatever the planner's statistics say: a tenant whose
// receipts grew faster than autovacuum analyses them was estimated at a row or
// two, and `notification_id = ANY(ids)` became a scan of all the tenant's
// receipts per batch (140-190 ms per 500 ids, a campaign's cost per recipient
// growing with the campaign).
func (s *Store) LatestReceipts(ctx context.Context, tenantID string, notificationIDs []string, channel herald.Channel) (map[string]Receipt, error) {
	rows, err := s.db.Query(ctx, `
		SELECT r.tenant_id, r.notification_id, r.channel, r.provider, r.provider_message_id, r.status, r.provider_status, r.occurred_at
		FROM unnest($2::bytea[]) AS ids(id)
		CROSS JOIN LATERAL (SELECT * FROM provider_receipts
			WHERE tenant_id = $1 AND notification_id = ids.id AND channel = $3
			ORDER BY `+receiptRankSQL+` DESC, occurred_at DESC, id DESC LIMIT 1) r`, tenantID, notificationIDs, channel)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]Receipt{}
	for rows.Next() {
		var r Receipt
		var status string
		if err := rows.Scan(&r.TenantID, &r.NotificationID, &r.Channel, &r.Provider, &r.ProviderMessageID, &status, &r.ProviderStatus, &r.OccurredAt); err != nil {
			return nil, err
		}
		r.Status = ReceiptStatus(status)
		out[r.NotificationID] = r
	}
	return out, rows.Err()
}
