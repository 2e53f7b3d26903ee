package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/templates"
)

// TemplateRecord is one stored version of a template.
type TemplateRecord struct {
	Template  templates.Template
	CreatedAt time.Time
}

// PutTemplate stores t as the template's next version and returns it with its
// version number. Concurrent saves of one template serialize on a row lock.
func (s *Store) PutTemplate(ctx context.Context, tenantID string, t templates.Template) (TemplateRecord, error) {
	var rec TemplateRecord
	err := s.InTx(ctx, func(tx *Store) error {
		// Serialize versions of this template (advisory lock on tenant + id).
		if _, err := tx.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2, 0))`, tenantID, t.ID); err != nil {
			return err
		}
		var next int
		if err := tx.db.QueryRow(ctx, `SELECT COALESCE(max(version), 0) + 1 FROM templates WHERE tenant_id = $1 AND template_id = $2`,
			tenantID, t.ID).Scan(&next); err != nil {
			return err
		}
		t.Version = next
		body, err := json.Marshal(t)
		if err != nil {
			return err
		}
		rec.Template = t
		return tx.db.QueryRow(ctx, `
			INSERT INTO templates (tenant_id, template_id, version, category, critical, body) VALUES ($1, $2, $3, $4, $5, $6)
			RETURNING created_at`, tenantID, t.ID, next, t.Category, t.Critical, body).Scan(&rec.CreatedAt)
	})
	return rec, err
}

// GetTemplate returns a version of a template (version 0: the latest). Deleted
// templates are not found by latest, but a given version always is, because
// notifications accepted before the delete still render with it.
func (s *Store) GetTemplate(ctx context.Context, tenantID, templateID string, version int) (TemplateRecord, error) {
	var body []byte
	var rec TemplateRecord
	var err error
	if version == 0 {
		err = s.db.QueryRow(ctx, `
			SELECT body, created_at FROM templates WHERE tenant_id = $1 AND template_id = $2 AND deleted_at IS NULL
			ORDER BY version DESC LIMIT 1`, tenantID, templateID).Scan(&body, &rec.CreatedAt)
	} else {
		err = s.db.QueryRow(ctx, `SELECT body, created_at FROM templates WHERE tenant_id = $1 AND template_id = $2 AND version = $3`,
			tenantID, templateID, version).Scan(&body, &rec.CreatedAt)
	}
	if err != nil {
		return TemplateRecord{}, dbx.NotFound(err)
	}
	if err := json.Unmarshal(body, &rec.Template); err != nil {
		return TemplateRecord{}, fmt.Errorf("decode template %s: %w", templateID, err)
	}
	return rec, nil
}

// ListTemplates returns a page of the latest version of each live template, by
// id: at most limit templates whose id sorts after after ("" for the first page),
// and whether more follow. Keyset on template_id (the primary key's second
// column), so a page costs O(limit) whatever the tenant has, and a template saved
// or deleted meanwhile never makes another one repeat or vanish across pages.
func (s *Store) ListTemplates(ctx context.Context, tenantID, after string, limit int) (recs []TemplateRecord, more bool, err error) {
	rows, err := s.db.Query(ctx, `
		SELECT DISTINCT ON (template_id) body, created_at FROM templates
		WHERE tenant_id = $1 AND deleted_at IS NULL AND template_id > $2
		ORDER BY template_id, version DESC LIMIT $3`, tenantID, after, limit+1)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var body []byte
		var rec TemplateRecord
		if err := rows.Scan(&body, &rec.CreatedAt); err != nil {
			return nil, false, err
		}
		if err := json.Unmarshal(body, &rec.Template); err != nil {
			return nil, false, err
		}
		recs = append(recs, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	if len(recs) > limit {
		return recs[:limit], true, nil
	}
	return recs, false, nil
}

// DeleteTemplate marks every version deleted; it reports whether a live one existed.
func (s *Store) DeleteTemplate(ctx context.Context, tenantID, templateID string) (bool, error) {
	tag, err := s.db.Exec(ctx, `UPDATE templates SET deleted_at = now() WHERE tenant_id = $1 AND template_id = $2 AND deleted_at IS NULL`,
		tenantID, templateID)
	return tag.RowsAffected() > 0, err
}
