package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
)

// Campaign is one bulk send (table campaigns).
type Campaign struct {
	TenantID        string
	ID              string
	WorkflowID      string
	TemplateID      string
	TemplateVersion int
	Category        string
	Channels        []herald.Channel
	// Data is the campaign's template data (JSON object).
	Data          json.RawMessage
	AudienceKind  string
	AudienceRef   string
	AudienceSize  *int64
	UnknownUsers  int64
	RatePerSecond float64
	Status        string
	SendAt        *time.Time
	CreatedAt     time.Time
	StartedAt     *time.Time
	FinishedAt    *time.Time
	UpdatedAt     time.Time
	// FailureReason and FailureMessage say why a failed campaign failed (nil
	// otherwise).
	FailureReason  *herald.Reason
	FailureMessage *string
}

const campaignColumns = `tenant_id, id, workflow_id, template_id, template_version, category, channels, data, audience_kind, audience_ref,
	audience_size, unknown_users, rate_per_second, status, send_at, created_at, started_at, finished_at, updated_at,
	failure_reason, failure_message`

func scanCampaign(row interface{ Scan(...any) error }) (Campaign, error) {
	var c Campaign
	err := row.Scan(&c.TenantID, &c.ID, &c.WorkflowID, &c.TemplateID, &c.TemplateVersion, &c.Category, &c.Channels, &c.Data,
		&c.AudienceKind, &c.AudienceRef, &c.AudienceSize, &c.UnknownUsers, &c.RatePerSecond, &c.Status, &c.SendAt,
		&c.CreatedAt, &c.StartedAt, &c.FinishedAt, &c.UpdatedAt, &c.FailureReason, &c.FailureMessage)
	return c, dbx.NotFound(err)
}

// ErrTooManyCampaigns: the tenant already has as many unfinished campaigns as
// its cap allows (CreateCampaign).
var ErrTooManyCampaigns = errors.New("store: the tenant's concurrent campaign cap is reached")

// activeCampaignStatuses are the statuses a campaign holds a concurrency slot in.
var activeCampaignStatuses = []string{herald.CampaignScheduled, herald.CampaignRunning, herald.CampaignPaused}

// CreateCampaign records a campaign, and for an inline audience its recipients as
// an inline recipient list (id = the campaign id), in one transaction. When the
// tenant already has a campaign with this id nothing is written and the existing
// one is returned with created=false: the campaign key is the submission dedup.
// With maxActive > 0, a new campaign is refused with ErrTooManyCampaigns when the
// tenant has maxActive campaigns scheduled, running or paused; creates of one
// tenant are serialized on its tenants row so two cannot both take the last slot.
func (s *Store) CreateCampaign(ctx context.Context, c Campaign, inlineUserIDs []string, maxActive int) (out Campaign, created bool, err error) {
	err = s.InTx(ctx, func(tx *Store) error {
		if maxActive > 0 {
			if existing, err := tx.GetCampaign(ctx, c.TenantID, c.ID); err == nil {
				out = existing
				return nil
			}
			var active int
			if err := tx.db.QueryRow(ctx, `
				SELECT (SELECT count(*) FROM campaigns WHERE tenant_id = t.id AND status = ANY($2))
				FROM tenants t WHERE t.id = $1 FOR UPDATE`, c.TenantID, activeCampaignStatuses).Scan(&active); err != nil {
				return dbx.NotFound(err)
			}
			if active >= maxActive {
				return ErrTooManyCampaigns
			}
		}
		out, err = scanCampaign(tx.db.QueryRow(ctx, `
			INSERT INTO campaigns (tenant_id, id, workflow_id, template_id, template_version, category, channels, data,
				audience_kind, audience_ref, rate_per_second, status, send_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT (tenant_id, id) DO NOTHING
			RETURNING `+campaignColumns,
			c.TenantID, c.ID, c.WorkflowID, c.TemplateID, c.TemplateVersion, c.Category, c.Channels, []byte(c.Data),
			c.AudienceKind, c.AudienceRef, c.RatePerSecond, c.Status, c.SendAt))
		if errors.Is(err, herald.ErrNotFound) {
			out, err = tx.GetCampaign(ctx, c.TenantID, c.ID)
			return err
		}
		if err != nil {
			return err
		}
		created = true
		if c.AudienceKind != herald.AudienceUserIDs {
			return nil
		}
		if _, err := tx.db.Exec(ctx, `INSERT INTO recipient_lists (tenant_id, id, name, kind, line_count) VALUES ($1, $2, $2, $3, $4)`,
			c.TenantID, c.ID, herald.ListInline, len(inlineUserIDs)); err != nil {
			return err
		}
		_, err = tx.db.Exec(ctx, `
			INSERT INTO recipient_list_members (tenant_id, list_id, user_id)
			SELECT $1, $2, u FROM unnest($3::text[]) u ON CONFLICT DO NOTHING`, c.TenantID, c.ID, inlineUserIDs)
		return err
	})
	return out, created, err
}

// GetCampaign returns one of the tenant's campaigns.
func (s *Store) GetCampaign(ctx context.Context, tenantID, id string) (Campaign, error) {
	return scanCampaign(s.db.QueryRow(ctx, `SELECT `+campaignColumns+` FROM campaigns WHERE tenant_id = $1 AND id = $2`, tenantID, id))
}

// CampaignCursor is the (created_at, id) of the last campaign of a page.
type CampaignCursor struct {
	CreatedAt time.Time
	ID        string
}

// ListCampaigns returns up to limit campaigns, newest first, after the cursor.
func (s *Store) ListCampaigns(ctx context.Context, tenantID string, after *CampaignCursor, limit int) (out []Campaign, more bool, err error) {
	args := []any{tenantID, limit + 1}
	where := ""
	if after != nil {
		args = append(args, after.CreatedAt, after.ID)
		where = " AND (created_at, id) < ($3, $4)"
	}
	rows, err := s.db.Query(ctx, `SELECT `+campaignColumns+` FROM campaigns WHERE tenant_id = $1`+where+`
		ORDER BY created_at DESC, id DESC LIMIT $2`, args...)
	if err != nil {
		return nil, false, err
	}
	out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Campaign, error) { return scanCampaign(r) })
	if err != nil {
		return nil, false, err
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// SetCampaignStatus records the status the campaign workflow reports; running
// sets started_at once and a final status sets finished_at.
func (s *Store) SetCampaignStatus(ctx context.Context, tenantID, id, status string) error {
	tag, err := s.db.Exec(ctx, `
		UPDATE campaigns SET status = $3,
			started_at = CASE WHEN $3 = $4 THEN COALESCE(started_at, now()) ELSE started_at END,
			finished_at = CASE WHEN $3 IN ($5, $6, $7) THEN COALESCE(finished_at, now()) ELSE finished_at END,
			updated_at = now()
		WHERE tenant_id = $1 AND id = $2`,
		tenantID, id, status, herald.CampaignRunning, herald.CampaignCompleted, herald.CampaignCancelled, herald.CampaignFailed)
	if err == nil && tag.RowsAffected() == 0 {
		return herald.ErrNotFound
	}
	return err
}

// FailCampaign ends an unfinished campaign failed with its reason and message;
// failed reports whether it did (false: the campaign had already finished, and
// keeps its status).
func (s *Store) FailCampaign(ctx context.Context, tenantID, id string, reason herald.Reason, message string) (failed bool, err error) {
	tag, err := s.db.Exec(ctx, `
		UPDATE campaigns SET status = $3, failure_reason = $4, failure_message = $5,
			finished_at = COALESCE(finished_at, now()), updated_at = now()
		WHERE tenant_id = $1 AND id = $2 AND status = ANY($6)`,
		tenantID, id, herald.CampaignFailed, reason, message, activeCampaignStatuses)
	return tag.RowsAffected() == 1, err
}

// ActiveCampaigns returns the tenant's unfinished campaigns (scheduled,
// running or paused), at most limit, oldest first.
func (s *Store) ActiveCampaigns(ctx context.Context, tenantID string, limit int) ([]Campaign, error) {
	rows, err := s.db.Query(ctx, `SELECT `+campaignColumns+` FROM campaigns WHERE tenant_id = $1 AND status = ANY($2)
		ORDER BY created_at, id LIMIT $3`, tenantID, activeCampaignStatuses, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Campaign, error) { return scanCampaign(r) })
}

// MarkCampaignQuota records that the campaign's audience is reserved on the
// given UTC day's quota; marked is false when it already was (a retried
// start), and the reservation must not be made again. Run it in the
// reservation's transaction.
func (s *Store) MarkCampaignQuota(ctx context.Context, tenantID, id string, day time.Time) (marked bool, err error) {
	tag, err := s.db.Exec(ctx, `UPDATE campaigns SET quota_day = $3 WHERE tenant_id = $1 AND id = $2 AND quota_day IS NULL`,
		tenantID, id, day.UTC().Format(time.DateOnly))
	return tag.RowsAffected() == 1, err
}

// DB is the store's connection (a transaction inside InTx), for the limiter's
// statements that must commit with the store's.
func (s *Store) DB() dbx.DB { return s.db }

// SetCampaignAudience records the audience's size (known users) and how many of
// its ids name no user.
func (s *Store) SetCampaignAudience(ctx context.Context, tenantID, id string, size, unknown int64) error {
	_, err := s.db.Exec(ctx, `UPDATE campaigns SET audience_size = $3, unknown_users = $4, updated_at = now() WHERE tenant_id = $1 AND id = $2`,
		tenantID, id, size, unknown)
	return err
}

// audienceSource is the FROM clause and filter of a campaign's audience: m is the
// membership relation (with user_id and data), $1 the tenant and $2 the
// audience reference.
func audienceSource(kind string) (from string, err error) {
	switch kind {
	case herald.AudienceUserIDs, herald.AudienceList:
		return `(SELECT tenant_id, user_id, data FROM recipient_list_members WHERE tenant_id = $1 AND list_id = $2)`, nil
	case herald.AudienceTopic:
		return `(SELECT tenant_id, user_id, NULL::jsonb AS data FROM topic_subscribers WHERE tenant_id = $1 AND topic = $2)`, nil
	case herald.AudienceAllUsers:
		return `(SELECT tenant_id, user_id, NULL::jsonb AS data FROM users WHERE tenant_id = $1 AND $2::text IS NOT NULL)`, nil
	}
	return "", fmt.Errorf("unknown audience kind %q", kind)
}

// CountAudience counts the audience's members that are users, and those that
// are not (an uploaded list may name unknown users).
func (s *Store) CountAudience(ctx context.Context, tenantID, kind, ref string) (known, unknown int64, err error) {
	from, err := audienceSource(kind)
	if err != nil {
		return 0, 0, err
	}
	if kind == herald.AudienceAllUsers {
		err = s.db.QueryRow(ctx, `SELECT count(*) FROM users WHERE tenant_id = $1`, tenantID).Scan(&known)
		return known, 0, err
	}
	// Each member is one probe of users' primary key (a scalar subquery is
	// never turned into a join), whatever the planner believes: see
	// AudiencePage.
	err = s.db.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE known), count(*) FILTER (WHERE NOT known)
		FROM (SELECT (SELECT true FROM users u WHERE u.tenant_id = m.tenant_id AND u.user_id = m.user_id) IS NOT NULL AS known
			FROM `+from+` m) x`, tenantID, ref).Scan(&known, &unknown)
	return known, unknown, err
}

// AudienceBoundariesParams selects the pages AudienceBoundaries delimits.
type AudienceBoundariesParams struct {
	TenantID string
	Kind     string // herald.Audience*
	Ref      string // the list or topic (ignored for all users)
	After    string // the user id the pages start after ("" : the start)
	PageSize int
	Pages    int
}

// AudienceBoundaries pages the audience by keyset: after the user id After, it
// returns the last user id of each of up to Pages pages of PageSize members (the
// last page may be short). Fewer than Pages boundaries means the audience ends.
func (s *Store) AudienceBoundaries(ctx context.Context, p AudienceBoundariesParams) ([]string, error) {
	from, err := audienceSource(p.Kind)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `SELECT m.user_id FROM `+from+` m WHERE m.user_id > $3 ORDER BY m.user_id LIMIT $4`,
		p.TenantID, p.Ref, p.After, p.PageSize*p.Pages)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var out []string
	for i := p.PageSize - 1; i < len(ids); i += p.PageSize {
		out = append(out, ids[i])
	}
	if n := len(ids); n > 0 && n%p.PageSize != 0 {
		out = append(out, ids[n-1])
	}
	return out, nil
}

// AudienceMember is one recipient of a campaign page: the user's profile, own
// preferences (raw, nil when none) and per-recipient data (nil when none).
type AudienceMember struct {
	UserID      string
	Email       string
	Phone       string
	Locale      string
	Timezone    string
	Data        json.RawMessage
	Preferences json.RawMessage
}

// AudiencePageParams selects the members AudiencePage returns.
type AudiencePageParams struct {
	TenantID string
	Kind     string // herald.Audience*
	Ref      string // the list or topic (ignored for all users)
	After    string // members with user_id > After…
	Through  string // …and <= Through ("" : no upper bound)
	// Only, when not empty, replaces the After/Through range: these user ids,
	// those that are members.
	Only  []string
	Limit int
}

// AudiencePage returns the audience members that p selects, in user id order;
// members that are not users are skipped.
//
// Each member's user and preferences are one primary-key probe each: the
// OFFSET 0 keeps PostgreSQL from flattening the lateral subqueries into joins
// planned from statistics. Right after a bulk import (a new tenant's users
// estimated at one row) such a join became a nested loop over all the
// tenant's users per member, 15 s instead of 0.2 s for 10,000 recipients
// (TestCampaignAudienceRightAfterBulkInsertIsLinear).
func (s *Store) AudiencePage(ctx context.Context, p AudiencePageParams) ([]AudienceMember, error) {
	from, err := audienceSource(p.Kind)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `
		SELECT u.user_id, COALESCE(u.email, ''), COALESCE(u.phone, ''), COALESCE(u.locale, ''), COALESCE(u.timezone, ''), m.data, p.preferences
		FROM `+from+` m
		CROSS JOIN LATERAL (SELECT * FROM users u WHERE u.tenant_id = m.tenant_id AND u.user_id = m.user_id OFFSET 0) u
		LEFT JOIN LATERAL (SELECT p.preferences FROM user_preferences p
			WHERE p.tenant_id = u.tenant_id AND p.user_id = u.user_id OFFSET 0) p ON true
		WHERE CASE WHEN cardinality($5::text[]) > 0 THEN m.user_id = ANY($5)
			ELSE m.user_id > $3 AND ($4 = '' OR m.user_id <= $4) END
		ORDER BY m.user_id LIMIT $6`, p.TenantID, p.Ref, p.After, p.Through, p.Only, p.Limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AudienceMember, error) {
		var m AudienceMember
		var data, prefs []byte
		err := r.Scan(&m.UserID, &m.Email, &m.Phone, &m.Locale, &m.Timezone, &data, &prefs)
		m.Data, m.Preferences = data, prefs
		return m, err
	})
}

// CampaignNotifications describes the notification rows of a page of campaign
// recipients.
type CampaignNotifications struct {
	TenantID        string
	CampaignID      string
	WorkflowID      string
	TemplateID      string
	TemplateVersion int
	Category        string
	Channels        []herald.Channel
	AcceptedAt      time.Time
	NotificationIDs []string
	UserIDs         []string
}

// campaignAcceptedAtSQL reads a campaign's recipients' accepted_at ($1 the
// tenant, $2 the campaign): when it became due.
const campaignAcceptedAtSQL = `SELECT greatest(created_at, COALESCE(send_at, created_at)) FROM campaigns WHERE tenant_id = $1 AND id = $2`

// CampaignAcceptedAt is the accepted_at of every recipient's notification and
// delivery rows of a campaign (InsertCampaignNotifications): where their
// partitions are. Zero when the campaign row is gone.
func (s *Store) CampaignAcceptedAt(ctx context.Context, tenantID, campaignID string) (time.Time, error) {
	var at time.Time
	err := s.db.QueryRow(ctx, campaignAcceptedAtSQL, tenantID, campaignID).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	return at, err
}

// InsertCampaignNotifications writes each recipient's notification row and one
// pending delivery row per channel, in bulk. Existing rows are kept (ON
// CONFLICT DO NOTHING): re-running a batch finds the guard rows it wrote before.
// The recipients' notifications become due here: the same transaction numbers
// them in their users' due sequences (assignDueBatch), so a campaign message
// and a single notification to one user are in the order they became due.
func (s *Store) InsertCampaignNotifications(ctx context.Context, n CampaignNotifications) error {
	return s.InTx(ctx, func(tx *Store) error {
		// A recipient's accepted_at is when its campaign became due (its
		// send_at, or its creation), fixed when the campaign is created, the
		// same for every run of every batch: it is part of the notification's
		// and the delivery guard's keys (migration 0102), so a re-run batch
		// must write the same one to find the rows it wrote before.
		// n.AcceptedAt only stands in for a campaign row that is missing.
		acceptedAt := n.AcceptedAt
		if err := tx.db.QueryRow(ctx, campaignAcceptedAtSQL, n.TenantID, n.CampaignID).Scan(&acceptedAt); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, err := tx.db.Exec(ctx, `
			INSERT INTO notifications (tenant_id, id, user_id, template_id, channels, workflow_id, run_id, dedup_key_hash, status,
				accepted_at, template_version, category, campaign_id)
			SELECT $1, t.id, t.uid, $2, NULL, `+derivedNotificationIDs("$3", "''", "$4", "$1", "t.id", "$4")+`, $5, $6, $7, NULLIF($8, ''), $4
			FROM unnest($9::bytea[], $10::text[]) AS t(id, uid)
			ON CONFLICT (tenant_id, id, accepted_at) DO NOTHING`,
			n.TenantID, n.TemplateID, n.WorkflowID, n.CampaignID, herald.NotificationSending, acceptedAt,
			n.TemplateVersion, n.Category, n.NotificationIDs, n.UserIDs); err != nil {
			return err
		}
		_, err := tx.db.Exec(ctx, `
			INSERT INTO deliveries (tenant_id, notification_id, channel, status, campaign_id, accepted_at)
			SELECT $1, id, ch, $4, $5, $6 FROM unnest($2::bytea[]) id CROSS JOIN unnest($3::text[]) ch
			ON CONFLICT (tenant_id, notification_id, channel, accepted_at) DO NOTHING`,
			n.TenantID, n.NotificationIDs, n.Channels, herald.DeliveryPending, n.CampaignID, acceptedAt)
		if err != nil {
			return err
		}
		return tx.assignDueBatch(ctx, n.TenantID, n.UserIDs, n.NotificationIDs, acceptedAt)
	})
}

// GuardState is a delivery's status and reason, as a batch's guard reads them.
type GuardState struct {
	Status herald.DeliveryStatus
	Reason herald.Reason
}

// DeliveryStatuses reads the guard records of many notifications at once:
// notification id → channel → state.
func (s *Store) DeliveryStatuses(ctx context.Context, tenantID string, notificationIDs []string) (map[string]map[herald.Channel]GuardState, error) {
	rows, err := s.db.Query(ctx, `SELECT notification_id, channel, status, COALESCE(reason, '') FROM deliveries WHERE tenant_id = $1 AND notification_id = ANY($2)`,
		tenantID, notificationIDs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]map[herald.Channel]GuardState{}
	for rows.Next() {
		var id string
		var ch herald.Channel
		var g GuardState
		if err := rows.Scan(&id, &ch, &g.Status, &g.Reason); err != nil {
			return nil, err
		}
		if out[id] == nil {
			out[id] = map[herald.Channel]GuardState{}
		}
		out[id][ch] = g
	}
	return out, rows.Err()
}

// BulkDeliveryUpdate is one channel's new state in UpdateDeliveries.
type BulkDeliveryUpdate struct {
	NotificationID    string
	Channel           herald.Channel
	Status            herald.DeliveryStatus
	Reason            herald.Reason
	LastError         string
	Provider          string
	ProviderMessageID string
	// Attempts is added to the row's attempt count.
	Attempts int
	// Accepted says this update records a provider call that accepted (Status
	// sent): the row carries it as the channel's accepted attempt
	// (accepted_attempt, numbered after the attempts in delivery_attempts, as
	// RecordAttempts numbers a row) unless it already carries one, and
	// ListAttemptsOf shows it with no delivery_attempts row of its own. An
	// update that did not apply or whose row carries another call
	// (UpdateDeliveriesApplied false) carries nothing: its caller records the
	// attempt with RecordAttempts.
	Accepted bool
}

// ClearReason as a BulkDeliveryUpdate's Reason clears the row's reason.
const ClearReason = "-"

// channelOf is one channel of a notification (or of a campaign recipient): a
// key of the per-channel batches below.
type channelOf struct {
	id string
	ch herald.Channel
}

// UpdateDeliveries applies many delivery updates in one statement, each only if
// it does not move its channel backwards (as UpdateDelivery). Empty strings
// leave a column as it is; Reason ClearReason clears it.
func (s *Store) UpdateDeliveries(ctx context.Context, tenantID string, us []BulkDeliveryUpdate) error {
	_, err := s.updateDeliveries(ctx, tenantID, us, false)
	return err
}

// UpdateDeliveriesApplied is UpdateDeliveries reporting, for each update, whether
// it applied: false when its row is missing or already further on (a channel
// some other run recorded sent, delivered, failed, suppressed or cancelled
// does not go back to "sending"). For an Accepted update, true says that it
// applied and that the row carries its call as the channel's accepted attempt
// (the row carried none before, or carried this very call: a retried write);
// false, that the call needs its delivery_attempts row: the update was
// refused, or the row already carries another call (two overlapping runs
// both had their calls accepted), whose provider and message id it keeps.
func (s *Store) UpdateDeliveriesApplied(ctx context.Context, tenantID string, us []BulkDeliveryUpdate) ([]bool, error) {
	applied, err := s.updateDeliveries(ctx, tenantID, us, true)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(us))
	for i, u := range us {
		out[i] = applied[channelOf{u.NotificationID, u.Channel}]
	}
	return out, nil
}

// updateDeliveries is UpdateDeliveries; with returning, it also reports the
// channels it updated (for an Accepted update: and whose row carries its call).
func (s *Store) updateDeliveries(ctx context.Context, tenantID string, us []BulkDeliveryUpdate, returning bool) (map[channelOf]bool, error) {
	if len(us) == 0 {
		return nil, nil
	}
	// One UPDATE … FROM applies one of several matches per row, whichever: keep
	// only the last update of each channel, so a later decision always wins.
	last := make(map[channelOf]int, len(us))
	for i, u := range us {
		last[channelOf{u.NotificationID, u.Channel}] = i
	}
	if len(last) < len(us) {
		kept := make([]BulkDeliveryUpdate, 0, len(last))
		for i, u := range us {
			if last[channelOf{u.NotificationID, u.Channel}] == i {
				kept = append(kept, u)
			}
		}
		us = kept
	}
	// The tenant goes with each row rather than as one parameter: compared with
	// a constant, a tenant the statistics do not know yet (a new tenant's first
	// campaign) is estimated at a row or two, and the planner then reads every
	// delivery of the tenant to join them to the updates; compared per row, each
	// update finds its delivery by the index.
	cols := make([][]string, 8)
	attempts := make([]int32, len(us))
	accepted := make([]bool, len(us))
	for i, u := range us {
		for j, v := range []string{u.NotificationID, string(u.Channel), string(u.Status), string(u.Reason), u.LastError, u.Provider, u.ProviderMessageID, tenantID} {
			cols[j] = append(cols[j], v)
		}
		attempts[i], accepted[i] = int32(u.Attempts), u.Accepted
	}
	sql := `
		UPDATE deliveries d SET
			status = u.status,
			reason = CASE WHEN u.reason = '` + ClearReason + `' THEN NULL ELSE COALESCE(NULLIF(u.reason, ''), d.reason) END,
			last_error = COALESCE(NULLIF(u.err, ''), d.last_error),
			provider = ` + keepCarriedCallSQL("d.", "provider", "NULLIF(u.provider, '')") + `,
			provider_message_id = ` + keepCarriedCallSQL("d.", "provider_message_id", "NULLIF(u.pmid, '')") + `,
			attempts = d.attempts + u.attempts,
			sent_at = CASE WHEN u.status IN ($10, $11) THEN COALESCE(d.sent_at, now()) ELSE d.sent_at END,
			delivered_at = CASE WHEN u.status = $11 THEN COALESCE(d.delivered_at, now()) ELSE d.delivered_at END,
			accepted_attempt = CASE WHEN u.accepted THEN COALESCE(d.accepted_attempt, 1 + ` + storedAttemptsSQL("d.tenant_id", "d.notification_id", "d.channel") + `::int)
				ELSE d.accepted_attempt END,
			updated_at = now()
		FROM unnest($1::text[], $2::bytea[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::int[], $12::bool[])
			AS u(tenant, nid, channel, status, reason, err, provider, pmid, attempts, accepted)
		WHERE d.tenant_id = u.tenant AND d.notification_id = u.nid AND d.channel = u.channel
		  AND ` + rank("u.status") + ` >= ` + rank("d.status")
	args := []any{cols[7], cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], attempts, herald.DeliverySent, herald.DeliveryDelivered, accepted}
	if !returning {
		_, err := s.db.Exec(ctx, sql, args...)
		return nil, err
	}
	// An Accepted update's call is the one the row carries when the row's
	// provider and message id are the call's after the update (a row that
	// carries a call keeps its provider and message id, above; another call
	// has another message id). A call with no message id is the carried one
	// when the row's number is the one this statement gives it (the same
	// count, in the same snapshot).
	rows, err := s.db.Query(ctx, sql+` RETURNING d.notification_id, d.channel,
		NOT u.accepted OR (d.provider IS NOT DISTINCT FROM NULLIF(u.provider, '') AND CASE WHEN u.pmid <> '' THEN d.provider_message_id = u.pmid
			ELSE d.accepted_attempt = 1 + `+storedAttemptsSQL("d.tenant_id", "d.notification_id", "d.channel")+`::int END)`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	applied := make(map[channelOf]bool, len(us))
	for rows.Next() {
		var k channelOf
		var carried bool
		if err := rows.Scan(&k.id, &k.ch, &carried); err != nil {
			return nil, err
		}
		applied[k] = carried
	}
	return applied, rows.Err()
}

// RecomputeNotificationStatuses derives each notification's overall status from
// its deliveries (herald.OverallStatus, as RecomputeNotificationStatus does for
// one) and stores the ones that changed, in two statements for the whole page.
func (s *Store) RecomputeNotificationStatuses(ctx context.Context, tenantID string, notificationIDs []string) error {
	rows, err := s.db.Query(ctx, `
		SELECT notification_id, array_agg(status ORDER BY channel) FROM deliveries
		WHERE tenant_id = $1 AND notification_id = ANY($2) GROUP BY notification_id`, tenantID, notificationIDs)
	if err != nil {
		return err
	}
	var ids []string
	var statuses []herald.NotificationStatus
	for rows.Next() {
		var id string
		var sts []herald.DeliveryStatus
		if err := rows.Scan(&id, &sts); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
		statuses = append(statuses, herald.OverallStatus(sts))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	_, err = s.db.Exec(ctx, endStatusSQL(`
		UPDATE notifications n SET status = u.status, updated_at = now(), `+dueOnEndSQL("u.status")+`
		FROM unnest($2::bytea[], $3::text[]) AS u(id, status)
		WHERE n.tenant_id = $1 AND n.id = u.id AND n.status <> u.status`), tenantID, ids, statuses)
	return err
}

// CampaignCount is how many of a campaign's deliveries on one channel have one
// status and reason.
type CampaignCount struct {
	Channel herald.Channel
	Status  herald.DeliveryStatus
	Reason  herald.Reason
	Count   int64
}

// CampaignCounts groups the campaign's deliveries by channel, status and reason,
// and counts its recipients (notification rows written so far).
func (s *Store) CampaignCounts(ctx context.Context, tenantID, campaignID string) (counts []CampaignCount, recipients int64, err error) {
	rows, err := s.db.Query(ctx, `
		SELECT channel, status, COALESCE(reason, ''), count(*) FROM deliveries
		WHERE tenant_id = $1 AND campaign_id = $2
		GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`, tenantID, campaignID)
	if err != nil {
		return nil, 0, err
	}
	counts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (CampaignCount, error) {
		var c CampaignCount
		err := r.Scan(&c.Channel, &c.Status, &c.Reason, &c.Count)
		return c, err
	})
	if err != nil {
		return nil, 0, err
	}
	err = s.db.QueryRow(ctx, `SELECT count(*) FROM notifications WHERE tenant_id = $1 AND campaign_id = $2`, tenantID, campaignID).Scan(&recipients)
	return counts, recipients, err
}

// PendingItem is one channel of one recipient the campaign still owes (a
// quiet-hours deferral or a retry).
type PendingItem struct {
	UserID         string
	Channel        herald.Channel
	NotificationID string
	DueAt          time.Time
	Attempt        int
	Reason         herald.Reason
	LastError      string
}

// PutPending records (or moves) owed work.
func (s *Store) PutPending(ctx context.Context, tenantID, campaignID string, items []PendingItem) error {
	if len(items) == 0 {
		return nil
	}
	// ON CONFLICT cannot touch one row twice in a statement: the last item of
	// a channel wins.
	last := make(map[channelOf]int, len(items))
	for i, it := range items {
		last[channelOf{it.UserID, it.Channel}] = i
	}
	if len(last) < len(items) {
		kept := make([]PendingItem, 0, len(last))
		for i, it := range items {
			if last[channelOf{it.UserID, it.Channel}] == i {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	cols := make([][]string, 5)
	due := make([]time.Time, len(items))
	attempts := make([]int32, len(items))
	for i, it := range items {
		for j, v := range []string{it.UserID, string(it.Channel), it.NotificationID, string(it.Reason), it.LastError} {
			cols[j] = append(cols[j], v)
		}
		due[i], attempts[i] = it.DueAt, int32(it.Attempt)
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO campaign_pending (tenant_id, campaign_id, user_id, channel, notification_id, reason, last_error, due_at, attempt)
		SELECT $1, $2, u, ch, nid, r, NULLIF(e, ''), due, att
		FROM unnest($3::text[], $4::text[], $5::bytea[], $6::text[], $7::text[], $8::timestamptz[], $9::int[]) AS t(u, ch, nid, r, e, due, att)
		ON CONFLICT (tenant_id, campaign_id, user_id, channel) DO UPDATE SET
			due_at = EXCLUDED.due_at, attempt = EXCLUDED.attempt, reason = EXCLUDED.reason, last_error = EXCLUDED.last_error`,
		tenantID, campaignID, cols[0], cols[1], cols[2], cols[3], cols[4], due, attempts)
	return err
}

// DuePending returns up to limit items due at or before now, oldest first.
func (s *Store) DuePending(ctx context.Context, tenantID, campaignID string, now time.Time, limit int) ([]PendingItem, error) {
	rows, err := s.db.Query(ctx, `
		SELECT user_id, channel, notification_id, due_at, attempt, reason, COALESCE(last_error, '')
		FROM campaign_pending WHERE tenant_id = $1 AND campaign_id = $2 AND due_at <= $3
		ORDER BY due_at, user_id, channel LIMIT $4`, tenantID, campaignID, now, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (PendingItem, error) {
		var p PendingItem
		err := r.Scan(&p.UserID, &p.Channel, &p.NotificationID, &p.DueAt, &p.Attempt, &p.Reason, &p.LastError)
		return p, err
	})
}

// DeletePending removes items that were handled. An item moved meanwhile
// (due_at changed by PutPending) stays.
func (s *Store) DeletePending(ctx context.Context, tenantID, campaignID string, items []PendingItem) error {
	if len(items) == 0 {
		return nil
	}
	users, chans := make([]string, len(items)), make([]herald.Channel, len(items))
	due := make([]time.Time, len(items))
	for i, it := range items {
		users[i], chans[i], due[i] = it.UserID, it.Channel, it.DueAt
	}
	_, err := s.db.Exec(ctx, `
		DELETE FROM campaign_pending p USING unnest($3::text[], $4::text[], $5::timestamptz[]) AS t(u, ch, due)
		WHERE p.tenant_id = $1 AND p.campaign_id = $2 AND p.user_id = t.u AND p.channel = t.ch AND p.due_at = t.due`,
		tenantID, campaignID, users, chans, due)
	return err
}

// NextPendingDue is when the campaign's earliest owed work is due (ok false:
// none is owed).
func (s *Store) NextPendingDue(ctx context.Context, tenantID, campaignID string) (due time.Time, ok bool, err error) {
	var t *time.Time
	err = s.db.QueryRow(ctx, `SELECT min(due_at) FROM campaign_pending WHERE tenant_id = $1 AND campaign_id = $2`, tenantID, campaignID).Scan(&t)
	if err != nil || t == nil {
		return time.Time{}, false, err
	}
	return *t, true, nil
}

// CancelPending ends all owed work of a cancelled campaign: each owed channel is
// recorded cancelled, and the rows go.
func (s *Store) CancelPending(ctx context.Context, tenantID, campaignID string) (ids []string, err error) {
	err = s.InTx(ctx, func(tx *Store) error {
		rows, err := tx.db.Query(ctx, `DELETE FROM campaign_pending WHERE tenant_id = $1 AND campaign_id = $2 RETURNING notification_id, channel`,
			tenantID, campaignID)
		if err != nil {
			return err
		}
		var us []BulkDeliveryUpdate
		seen := map[string]bool{}
		for rows.Next() {
			var u BulkDeliveryUpdate
			if err := rows.Scan(&u.NotificationID, &u.Channel); err != nil {
				rows.Close()
				return err
			}
			u.Status, u.Reason = herald.DeliveryCancelled, herald.ReasonCancelled
			us = append(us, u)
			if !seen[u.NotificationID] {
				seen[u.NotificationID] = true
				ids = append(ids, u.NotificationID)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		return tx.UpdateDeliveries(ctx, tenantID, us)
	})
	return ids, err
}
