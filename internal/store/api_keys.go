package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"time"

	"github.com/herald-notify/herald/internal/dbx"
)

// APIKey is a tenant's API key as it may be shown: never the key or its hash.
type APIKey struct {
	// ID names the key for listing and revoking ("key_" + 16 hex digits).
	ID       string `json:"id"`
	TenantID string `json:"-"`
	// Name is the tenant's label for the key ("" when none was given).
	Name string `json:"name"`
	// Prefix is the key's first characters ("hk_" + 6), to tell keys apart.
	Prefix    string    `json:"prefix"`
	CreatedAt time.Time `json:"created_at"`
	// LastUsedAt is when the key last authenticated a request, to within a
	// minute plus the API's auth cache TTL; nil if never.
	LastUsedAt *time.Time `json:"last_used_at"`
	// RevokedAt is set once the key was revoked.
	RevokedAt *time.Time `json:"revoked_at"`
}

// ErrLastActiveKey refuses to revoke a tenant's only active key: the tenant would
// be locked out (create another key first; an operator may force it).
var ErrLastActiveKey = errors.New("this is the tenant's last active API key")

const apiKeyColumns = `id, tenant_id, name, prefix, created_at, last_used_at, revoked_at`

func scanAPIKey(row interface{ Scan(...any) error }) (APIKey, error) {
	var k APIKey
	err := row.Scan(&k.ID, &k.TenantID, &k.Name, &k.Prefix, &k.CreatedAt, &k.LastUsedAt, &k.RevokedAt)
	return k, dbx.NotFound(err)
}

// CreateNamedAPIKey mints a new key for a tenant and stores its hash. The key is
// returned once; only its hash and prefix are stored.
func (s *Store) CreateNamedAPIKey(ctx context.Context, tenantID, name string) (APIKey, string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return APIKey{}, "", err
	}
	key := APIKeyPrefix + base64.RawURLEncoding.EncodeToString(raw)
	k, err := scanAPIKey(s.db.QueryRow(ctx, `
		INSERT INTO api_keys (id, key_hash, tenant_id, prefix, name, created_at) VALUES ($1, $2, $3, $4, $5, clock_timestamp())
		RETURNING `+apiKeyColumns,
		"key_"+randomHex(8), HashAPIKey(key), tenantID, key[:len(APIKeyPrefix)+6], name))
	if err != nil {
		return APIKey{}, "", err
	}
	return k, key, nil
}

// ListAPIKeys lists a tenant's keys, revoked ones included, oldest first.
func (s *Store) ListAPIKeys(ctx context.Context, tenantID string) ([]APIKey, error) {
	rows, err := s.db.Query(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE tenant_id = $1 ORDER BY created_at, id`, tenantID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []APIKey{}
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// RevokeAPIKey revokes one of the tenant's keys and returns it with its hash (so
// an API process can drop it from its auth cache at once). Revoking a revoked key
// changes nothing. The tenant's last active key is refused with ErrLastActiveKey
// unless allowLast; concurrent revocations serialize on the tenant row, so two of
// them can never revoke the last two keys together.
func (s *Store) RevokeAPIKey(ctx context.Context, tenantID, id string, allowLast bool) (APIKey, []byte, error) {
	var k APIKey
	var hash []byte
	err := s.InTx(ctx, func(tx *Store) error {
		var one int
		if err := tx.db.QueryRow(ctx, `SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE`, tenantID).Scan(&one); err != nil {
			return dbx.NotFound(err)
		}
		var active int
		err := tx.db.QueryRow(ctx, `
			SELECT `+apiKeyColumns+`, key_hash,
				(SELECT count(*) FROM api_keys a WHERE a.tenant_id = $1 AND a.revoked_at IS NULL)
			FROM api_keys WHERE tenant_id = $1 AND id = $2`, tenantID, id).
			Scan(&k.ID, &k.TenantID, &k.Name, &k.Prefix, &k.CreatedAt, &k.LastUsedAt, &k.RevokedAt, &hash, &active)
		if err != nil || k.RevokedAt != nil {
			return dbx.NotFound(err)
		}
		if active <= 1 && !allowLast {
			return ErrLastActiveKey
		}
		k, err = scanAPIKey(tx.db.QueryRow(ctx, `
			UPDATE api_keys SET revoked_at = now() WHERE tenant_id = $1 AND id = $2 RETURNING `+apiKeyColumns, tenantID, id))
		return err
	})
	if err != nil {
		return APIKey{}, nil, err
	}
	return k, hash, nil
}

// APIKeyOf returns the stored record of a presented key (revoked or not), or
// herald.ErrNotFound.
func (s *Store) APIKeyOf(ctx context.Context, key string) (APIKey, error) {
	return scanAPIKey(s.db.QueryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE key_hash = $1`, HashAPIKey(key)))
}
