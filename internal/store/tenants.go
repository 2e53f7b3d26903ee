package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"time"
)

// Tenant is one customer application.
type Tenant struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
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

// CreateAPIKey mints a new key for a tenant and stores its hash.
func (s *Store) CreateAPIKey(ctx context.Context, tenantID string) (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	key := APIKeyPrefix + base64.RawURLEncoding.EncodeToString(raw)
	_, err := s.db.Exec(ctx,
		`INSERT INTO api_keys (key_hash, tenant_id, prefix) VALUES ($1, $2, $3)`,
		HashAPIKey(key), tenantID, key[:len(APIKeyPrefix)+6])
	return key, err
}

// TenantByAPIKey resolves a presented key to its tenant.
func (s *Store) TenantByAPIKey(ctx context.Context, key string) (Tenant, error) {
	var t Tenant
	err := s.db.QueryRow(ctx, `
		SELECT t.id, t.name, t.created_at FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
		WHERE k.key_hash = $1 AND k.revoked_at IS NULL`, HashAPIKey(key)).
		Scan(&t.ID, &t.Name, &t.CreatedAt)
	return t, notFound(err)
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
	return t, notFound(err)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b)
}
