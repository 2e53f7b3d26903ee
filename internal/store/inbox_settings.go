package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/dbx"
)

// InboxSettings are a tenant's inbox settings.
type InboxSettings struct {
	// AllowedOrigins are the browser origins (scheme://host[:port]) that may call
	// the inbox endpoints with a user token.
	AllowedOrigins []string
	// HMACSecret is the sealed secret the tenant signs user hashes with (nil: none yet).
	HMACSecret []byte
	// HMACRotatedAt is when HMACSecret was made (nil: no secret yet).
	HMACRotatedAt *time.Time
	UpdatedAt     time.Time
}

// GetInboxSettings returns a tenant's inbox settings (the zero value when never set).
func (s *Store) GetInboxSettings(ctx context.Context, tenantID string) (InboxSettings, error) {
	var st InboxSettings
	err := s.db.QueryRow(ctx, `SELECT allowed_origins, hmac_secret, hmac_rotated_at, updated_at FROM inbox_settings WHERE tenant_id = $1`, tenantID).
		Scan(&st.AllowedOrigins, &st.HMACSecret, &st.HMACRotatedAt, &st.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return InboxSettings{AllowedOrigins: []string{}}, nil
	}
	if err != nil {
		return InboxSettings{}, err
	}
	if st.AllowedOrigins == nil {
		st.AllowedOrigins = []string{}
	}
	return st, nil
}

// PutInboxAllowedOrigins replaces a tenant's allowed origins.
func (s *Store) PutInboxAllowedOrigins(ctx context.Context, tenantID string, origins []string) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO inbox_settings (tenant_id, allowed_origins) VALUES ($1, $2)
		ON CONFLICT (tenant_id) DO UPDATE SET allowed_origins = EXCLUDED.allowed_origins, updated_at = now()`, tenantID, origins)
	return err
}

// PutInboxHMACSecret stores a tenant's (sealed) user-hash secret, replacing the old one.
func (s *Store) PutInboxHMACSecret(ctx context.Context, tenantID string, sealed []byte) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO inbox_settings (tenant_id, hmac_secret, hmac_rotated_at) VALUES ($1, $2, clock_timestamp())
		ON CONFLICT (tenant_id) DO UPDATE SET hmac_secret = EXCLUDED.hmac_secret, hmac_rotated_at = EXCLUDED.hmac_rotated_at,
		    updated_at = now()`, tenantID, sealed)
	return err
}

// TenantByID returns one tenant (herald.ErrNotFound if none).
func (s *Store) TenantByID(ctx context.Context, id string) (Tenant, error) {
	var t Tenant
	err := s.db.QueryRow(ctx, `SELECT id, name, created_at FROM tenants WHERE id = $1`, id).Scan(&t.ID, &t.Name, &t.CreatedAt)
	return t, dbx.NotFound(err)
}

// RevokeUserTokens refuses from now on every user token of the user issued
// before now, and returns that instant.
func (s *Store) RevokeUserTokens(ctx context.Context, tenantID, userID string) (time.Time, error) {
	var at time.Time
	err := s.db.QueryRow(ctx, `
		INSERT INTO inbox_token_revocations (tenant_id, user_id, not_before) VALUES ($1, $2, clock_timestamp())
		ON CONFLICT (tenant_id, user_id) DO UPDATE SET not_before = EXCLUDED.not_before
		RETURNING not_before`, tenantID, userID).Scan(&at)
	return at, err
}

// UserTokensNotBefore is the instant before which the user's tokens are
// refused (the zero time: none are). aliases are other ids the user's
// revocations are recorded under (the anonymous id of an erasure): the latest
// of all counts.
func (s *Store) UserTokensNotBefore(ctx context.Context, tenantID, userID string, aliases ...string) (time.Time, error) {
	var at *time.Time
	err := s.db.QueryRow(ctx, `SELECT max(not_before) FROM inbox_token_revocations WHERE tenant_id = $1 AND user_id = ANY($2)`,
		tenantID, append([]string{userID}, aliases...)).Scan(&at)
	if err != nil || at == nil {
		return time.Time{}, err
	}
	return *at, nil
}
