package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/herald-notify/herald/internal/dbx"
)

// Tenant is one customer application.
type Tenant struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	// APIKeyID is the public id of the API key the tenant was resolved from
	// (TenantByAPIKey only): who made a change, for the audit log.
	APIKeyID string `json:"-"`
}

// APIKeyPrefix starts every Herald API key, so leaked keys are easy to scan for.
const APIKeyPrefix = "hk_"

// HashAPIKey is the only form of a key that is stored.
func HashAPIKey(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

// CreateTenant creates a tenant and its first API key, which is returned once.
func (s *Store) CreateTenant(ctx context.Context, name string) (Tenant, string, error) {
	var t Tenant
	err := s.InTx(ctx, func(tx *Store) error {
		id := "t_" + randomHex(8)
		if err := tx.db.QueryRow(ctx,
			`INSERT INTO tenants (id, name) VALUES ($1, $2) RETURNING id, name, created_at`,
			id, name).Scan(&t.ID, &t.Name, &t.CreatedAt); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return Tenant{}, "", err
	}
	key, err := s.CreateAPIKey(ctx, t.ID)
	return t, key, err
}

// CreateAPIKey mints a new unnamed key for a tenant and stores its hash; the key
// is returned once (see CreateNamedAPIKey).
func (s *Store) CreateAPIKey(ctx context.Context, tenantID string) (string, error) {
	_, key, err := s.CreateNamedAPIKey(ctx, tenantID, "")
	return key, err
}

// TenantByAPIKey resolves a presented key to its tenant; a revoked or unknown key
// is herald.ErrNotFound. It also notes when the key was last used, writing at most
// once a minute per key (the API calls it only on an auth cache miss).
func (s *Store) TenantByAPIKey(ctx context.Context, key string) (Tenant, error) {
	var t Tenant
	err := s.db.QueryRow(ctx, `
		WITH k AS (
			SELECT key_hash, id, tenant_id, last_used_at FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL
		), used AS (
			UPDATE api_keys SET last_used_at = now()
			WHERE key_hash IN (SELECT key_hash FROM k WHERE last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
		)
		SELECT t.id, t.name, t.created_at, k.id FROM k JOIN tenants t ON t.id = k.tenant_id`, HashAPIKey(key)).
		Scan(&t.ID, &t.Name, &t.CreatedAt, &t.APIKeyID)
	return t, dbx.NotFound(err)
}

// ListTenants lists every tenant, oldest first.
func (s *Store) ListTenants(ctx context.Context) ([]Tenant, error) {
	rows, err := s.db.Query(ctx, `SELECT id, name, created_at FROM tenants ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Tenant
	for rows.Next() {
		var t Tenant
		if err := rows.Scan(&t.ID, &t.Name, &t.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// TenantByName finds a tenant by its name (the dev stack reuses its demo tenant).
func (s *Store) TenantByName(ctx context.Context, name string) (Tenant, error) {
	var t Tenant
	err := s.db.QueryRow(ctx, `SELECT id, name, created_at FROM tenants WHERE name = $1 ORDER BY created_at LIMIT 1`, name).
		Scan(&t.ID, &t.Name, &t.CreatedAt)
	return t, dbx.NotFound(err)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b)
}
