package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// Branding is how a tenant's hosted pages (the preference centre) look: its
// name, accent colour (#rrggbb) and logo URL (https). Empty fields: Herald's
// neutral defaults. The API validates them (api/preference_centre.go); the
// page escapes them anyway.
type Branding struct {
	Name    string `json:"name"`
	Color   string `json:"color"`
	LogoURL string `json:"logo_url"`
}

// GetInboxBranding returns a tenant's branding (zero when never set). It lives
// in the inbox_settings row (migration 0076).
func (s *Store) GetInboxBranding(ctx context.Context, tenantID string) (Branding, error) {
	var b Branding
	err := s.db.QueryRow(ctx, `SELECT COALESCE(brand_name, ''), COALESCE(brand_color, ''), COALESCE(brand_logo_url, '')
		FROM inbox_settings WHERE tenant_id = $1`, tenantID).Scan(&b.Name, &b.Color, &b.LogoURL)
	if errors.Is(err, pgx.ErrNoRows) {
		return Branding{}, nil
	}
	return b, err
}

// PutInboxBranding replaces a tenant's branding.
func (s *Store) PutInboxBranding(ctx context.Context, tenantID string, b Branding) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO inbox_settings (tenant_id, brand_name, brand_color, brand_logo_url)
		VALUES ($1, NULLIF($2, ''), NULLIF($3, ''), NULLIF($4, ''))
		ON CONFLICT (tenant_id) DO UPDATE SET brand_name = EXCLUDED.brand_name, brand_color = EXCLUDED.brand_color,
			brand_logo_url = EXCLUDED.brand_logo_url, updated_at = now()`, tenantID, b.Name, b.Color, b.LogoURL)
	return err
}

// TenantCategories lists the categories of the tenant's live templates, in
// order: the categories its notifications can carry.
func (s *Store) TenantCategories(ctx context.Context, tenantID string) ([]string, error) {
	rows, err := s.db.Query(ctx, `SELECT DISTINCT category FROM templates
		WHERE tenant_id = $1 AND deleted_at IS NULL AND category <> '' ORDER BY category LIMIT 200`, tenantID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
