package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/flows"
)

// FlowRecord is one stored version of a flow.
type FlowRecord struct {
	FlowID     string
	Version    int
	Definition flows.Definition
	CreatedAt  time.Time
}

// PutFlow stores def as the flow's next version and returns it with its
// version number; created reports that no live version existed before (the
// first save, or the first after a delete). Concurrent saves of one flow
// serialize on an advisory lock, so each gets its own number. Version numbers
// keep counting after a delete: a number is never reused, so a run pinned to
// one always finds the definition it started with.
func (s *Store) PutFlow(ctx context.Context, tenantID, flowID string, def flows.Definition) (rec FlowRecord, created bool, err error) {
	body, err := json.Marshal(def)
	if err != nil {
		return rec, false, err
	}
	err = s.InTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('flow/' || $1 || '/' || $2, 0))`, tenantID, flowID); err != nil {
			return err
		}
		var live bool
		if err := tx.db.QueryRow(ctx, `
			SELECT COALESCE(max(version), 0) + 1, COALESCE(bool_or(deleted_at IS NULL), false)
			FROM flows WHERE tenant_id = $1 AND flow_id = $2`, tenantID, flowID).Scan(&rec.Version, &live); err != nil {
			return err
		}
		created = !live
		rec.FlowID, rec.Definition = flowID, def
		return tx.db.QueryRow(ctx, `
			INSERT INTO flows (tenant_id, flow_id, version, category, definition) VALUES ($1, $2, $3, $4, $5)
			RETURNING created_at`, tenantID, flowID, rec.Version, def.Category, body).Scan(&rec.CreatedAt)
	})
	return rec, created, err
}

// GetFlow returns a version of a flow (version 0: the latest). A deleted flow
// is not found by latest, but a given version always is: runs started before
// the delete go on with it.
func (s *Store) GetFlow(ctx context.Context, tenantID, flowID string, version int) (FlowRecord, error) {
	var row interface{ Scan(...any) error }
	if version == 0 {
		row = s.db.QueryRow(ctx, `
			SELECT flow_id, version, definition, created_at FROM flows
			WHERE tenant_id = $1 AND flow_id = $2 AND deleted_at IS NULL
			ORDER BY version DESC LIMIT 1`, tenantID, flowID)
	} else {
		row = s.db.QueryRow(ctx, `
			SELECT flow_id, version, definition, created_at FROM flows
			WHERE tenant_id = $1 AND flow_id = $2 AND version = $3`, tenantID, flowID, version)
	}
	rec, err := scanFlow(row)
	return rec, dbx.NotFound(err)
}

// ListFlows returns a page of the latest version of each live flow, by id: at
// most limit flows whose id sorts after after ("" for the first page), and
// whether more follow (keyset on flow_id, as ListTemplates).
func (s *Store) ListFlows(ctx context.Context, tenantID, after string, limit int) (recs []FlowRecord, more bool, err error) {
	rows, err := s.db.Query(ctx, `
		SELECT DISTINCT ON (flow_id) flow_id, version, definition, created_at FROM flows
		WHERE tenant_id = $1 AND deleted_at IS NULL AND flow_id > $2
		ORDER BY flow_id, version DESC LIMIT $3`, tenantID, after, limit+1)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	for rows.Next() {
		rec, err := scanFlow(rows)
		if err != nil {
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

// DeleteFlow marks every version deleted; it reports whether a live one existed.
func (s *Store) DeleteFlow(ctx context.Context, tenantID, flowID string) (bool, error) {
	tag, err := s.db.Exec(ctx, `UPDATE flows SET deleted_at = now() WHERE tenant_id = $1 AND flow_id = $2 AND deleted_at IS NULL`,
		tenantID, flowID)
	return tag.RowsAffected() > 0, err
}

func scanFlow(row interface{ Scan(...any) error }) (FlowRecord, error) {
	var rec FlowRecord
	var body []byte
	if err := row.Scan(&rec.FlowID, &rec.Version, &body, &rec.CreatedAt); err != nil {
		return rec, err
	}
	// Condition values keep their numbers as json.Number, as Decode gave them.
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&rec.Definition); err != nil {
		return rec, fmt.Errorf("decode flow %s v%d: %w", rec.FlowID, rec.Version, err)
	}
	return rec, nil
}
