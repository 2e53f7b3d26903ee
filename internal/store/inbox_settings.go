package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// InboxSettings are a tenant's inbox settings.
type InboxSettings struct {
	// AllowedOrigins are the browser origins (scheme://host[:port]) that may call
	// the inbox endpoints with a user token.
	AllowedOrigins []string
	// HMACSecret is the sealed secret the tenant signs user hashes with (nil: none yet).
	HMACSecret []byte
	UpdatedAt  time.Time
}

// GetInboxSettings returns a tenant's inbox settings (the zero value when never set).
func (s *Store) GetInboxSettings(ctx context.Context, tenantID string) (InboxSettings, error) {
	var st InboxSettings
	err := s.db.QueryRow(ctx, `SELECT allowed_origins, hmac_secret, updated_at FROM inbox_settings WHERE tenant_id = $1`, tenantID).
		Scan(&st.AllowedOrigins, &st.HMACSecret, &st.UpdatedAt)
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
		INSERT INTO inbox_settings (tenant_id, hmac_secret) VALUES ($1, $2)
		ON CONFLICT (tenant_id) DO UPDATE SET hmac_secret = EXCLUDED.hmac_secret, updated_at = now()`, tenantID, sealed)
	return err
}

// TenantByID returns one tenant (herald.ErrNotFound if none).
func (s *Store) TenantByID(ctx context.Context, id string) (Tenant, error) {
	var t Tenant
	err := s.db.QueryRow(ctx, `SELECT id, name, created_at FROM tenants WHERE id = $1`, id).Scan(&t.ID, &t.Name, &t.CreatedAt)
	return t, notFound(err)
}
