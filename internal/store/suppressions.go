package store

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
)

// Suppression is one address on a tenant's suppression list (table
// suppressions, migration 0075; docs/suppressions.md).
type Suppression struct {
	Channel herald.Channel `json:"channel"`
	// Address is normalised (NormalizeAddress).
	Address   string                   `json:"address"`
	Reason    herald.SuppressionReason `json:"reason"`
	Source    herald.SuppressionSource `json:"source"`
	Detail    string                   `json:"detail,omitempty"`
	CreatedAt time.Time                `json:"created_at"`
}

// maxSuppressionDetail bounds the provider's words kept with an entry.
const maxSuppressionDetail = 500

// NormalizeAddress is the form an address is listed and looked up in, and the
// channel it blocks: an email address (it has an '@') lower-cased — mailbox
// providers treat the local part case-insensitively and so does SendGrid's own
// list — email; anything else is a phone number, kept as it is (Herald stores
// and Twilio sends E.164), sms.
func NormalizeAddress(address string) (herald.Channel, string) {
	if strings.Contains(address, "@") {
		return herald.ChannelEmail, strings.ToLower(address)
	}
	return herald.ChannelSMS, address
}

// AddSuppression lists an address (normalised here). Listing one already listed
// keeps the first entry (its reason and time) and reports false.
func (s *Store) AddSuppression(ctx context.Context, tenantID string, e Suppression) (Suppression, bool, error) {
	e.Channel, e.Address = NormalizeAddress(e.Address)
	if len(e.Detail) > maxSuppressionDetail {
		e.Detail = strings.ToValidUTF8(e.Detail[:maxSuppressionDetail], "")
	}
	tag, err := s.db.Exec(ctx, `
		INSERT INTO suppressions (tenant_id, channel, address, reason, source, detail)
		VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''))
		ON CONFLICT (tenant_id, channel, address) DO NOTHING`,
		tenantID, e.Channel, e.Address, e.Reason, e.Source, e.Detail)
	if err != nil {
		return Suppression{}, false, err
	}
	got, err := s.GetSuppression(ctx, tenantID, e.Address)
	return got, tag.RowsAffected() == 1, err
}

// RemoveSuppression takes an address off the list; it reports whether it was on it.
func (s *Store) RemoveSuppression(ctx context.Context, tenantID, address string) (bool, error) {
	ch, addr := NormalizeAddress(address)
	tag, err := s.db.Exec(ctx, `DELETE FROM suppressions WHERE tenant_id = $1 AND channel = $2 AND address = $3`,
		tenantID, ch, addr)
	return tag.RowsAffected() == 1, err
}

// RemoveSuppressionOf takes an address off the list only if it was listed for
// reason (an SMS START lifts a STOP, not a bounce or the tenant's own entry);
// it reports whether it did.
func (s *Store) RemoveSuppressionOf(ctx context.Context, tenantID, address string, reason herald.SuppressionReason) (bool, error) {
	ch, addr := NormalizeAddress(address)
	tag, err := s.db.Exec(ctx, `DELETE FROM suppressions WHERE tenant_id = $1 AND channel = $2 AND address = $3 AND reason = $4`,
		tenantID, ch, addr, reason)
	return tag.RowsAffected() == 1, err
}

// GetSuppression returns the entry of an address; herald.ErrNotFound when it is
// not listed.
func (s *Store) GetSuppression(ctx context.Context, tenantID, address string) (Suppression, error) {
	ch, addr := NormalizeAddress(address)
	rows, err := s.db.Query(ctx, `SELECT channel, address, reason, source, COALESCE(detail, ''), created_at
		FROM suppressions WHERE tenant_id = $1 AND channel = $2 AND address = $3`, tenantID, ch, addr)
	if err != nil {
		return Suppression{}, err
	}
	e, err := pgx.CollectExactlyOneRow(rows, scanSuppression)
	return e, dbx.NotFound(err)
}

// SuppressionCursor is the keyset position after which a page starts.
type SuppressionCursor struct {
	CreatedAt time.Time
	Address   string
}

// SuppressionPage lists the tenant's suppressions newest first, limit rows after
// the cursor (nil: from the newest); channel "" lists both channels.
func (s *Store) SuppressionPage(ctx context.Context, tenantID string, channel herald.Channel, after *SuppressionCursor, limit int) ([]Suppression, error) {
	q := `SELECT channel, address, reason, source, COALESCE(detail, ''), created_at
		FROM suppressions WHERE tenant_id = $1 AND ($2 = '' OR channel = $2)`
	args := []any{tenantID, string(channel), limit}
	if after != nil {
		q += ` AND (created_at, address) < ($4, $5)`
		args = append(args, after.CreatedAt, after.Address)
	}
	rows, err := s.db.Query(ctx, q+` ORDER BY created_at DESC, address DESC LIMIT $3`, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanSuppression)
}

func scanSuppression(r pgx.CollectableRow) (Suppression, error) {
	var e Suppression
	err := r.Scan(&e.Channel, &e.Address, &e.Reason, &e.Source, &e.Detail, &e.CreatedAt)
	e.CreatedAt = e.CreatedAt.UTC()
	return e, err
}

// SuppressedChannels reports which of a recipient's addresses are listed: the
// channels (email, sms) whose address is suppressed. Empty addresses are not
// looked up. One indexed read; gating calls it before rendering.
func (s *Store) SuppressedChannels(ctx context.Context, tenantID, email, phone string) (map[herald.Channel]bool, error) {
	if email == "" && phone == "" {
		return nil, nil
	}
	_, email = NormalizeAddress(email)
	rows, err := s.db.Query(ctx, `SELECT channel FROM suppressions
		WHERE tenant_id = $1 AND ((channel = 'email' AND address = $2) OR (channel = 'sms' AND address = $3))`,
		tenantID, email, phone)
	if err != nil {
		return nil, err
	}
	chans, err := pgx.CollectRows(rows, pgx.RowTo[herald.Channel])
	if err != nil || len(chans) == 0 {
		return nil, err
	}
	out := make(map[herald.Channel]bool, len(chans))
	for _, ch := range chans {
		out[ch] = true
	}
	return out, nil
}

// SuppressedAddresses returns which of many addresses are listed (a campaign
// batch's recipients), in normalised form: one read for the whole batch.
func (s *Store) SuppressedAddresses(ctx context.Context, tenantID string, emails, phones []string) (map[string]bool, error) {
	if len(emails) == 0 && len(phones) == 0 {
		return nil, nil
	}
	lower := make([]string, len(emails))
	for i, e := range emails {
		_, lower[i] = NormalizeAddress(e)
	}
	rows, err := s.db.Query(ctx, `SELECT address FROM suppressions
		WHERE tenant_id = $1 AND ((channel = 'email' AND address = ANY($2)) OR (channel = 'sms' AND address = ANY($3)))`,
		tenantID, lower, phones)
	if err != nil {
		return nil, err
	}
	addrs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(addrs) == 0 {
		return nil, err
	}
	out := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		out[a] = true
	}
	return out, nil
}
