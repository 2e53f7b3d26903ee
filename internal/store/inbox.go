package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
)

// InboxItem is one notification in a user's in-app inbox.
type InboxItem struct {
	NotificationID string    `json:"notification_id"`
	Title          string    `json:"title"`
	Body           string    `json:"body"`
	ActionURL      *string   `json:"action_url"`
	Category       string    `json:"category"`
	CreatedAt      time.Time `json:"created_at"`
	// Sequence is the notification's due sequence: the feed lists by it, newest
	// (highest) first (0: written before due sequences existed).
	Sequence   int64      `json:"sequence"`
	ReadAt     *time.Time `json:"read_at"`
	SeenAt     *time.Time `json:"seen_at"`
	ArchivedAt *time.Time `json:"archived_at"`
}

// InboxCounts are a user's inbox counters. Archived items count in none of them:
// total is every unarchived item, unread and unseen the unarchived ones not yet
// read / seen.
type InboxCounts struct {
	Total  int64 `json:"total"`
	Unread int64 `json:"unread"`
	Unseen int64 `json:"unseen"`
}

// add applies the change of one item from before to after (nil: absent).
func (c *InboxCounts) add(before, after *InboxItem) {
	c.Total += contrib(after, func(*InboxItem) bool { return true }) - contrib(before, func(*InboxItem) bool { return true })
	c.Unread += contrib(after, func(i *InboxItem) bool { return i.ReadAt == nil }) - contrib(before, func(i *InboxItem) bool { return i.ReadAt == nil })
	c.Unseen += contrib(after, func(i *InboxItem) bool { return i.SeenAt == nil }) - contrib(before, func(i *InboxItem) bool { return i.SeenAt == nil })
}

func contrib(it *InboxItem, counted func(*InboxItem) bool) int64 {
	if it == nil || it.ArchivedAt != nil || !counted(it) {
		return 0
	}
	return 1
}

// InboxEvent is one entry of a user's inbox event log: what changed, the item as
// it is after the change (item events) and the counts right after it. Seq
// numbers a user's events 1, 2, 3, … in commit order; the stream sends it as the
// SSE event id.
type InboxEvent struct {
	Seq            int64       `json:"id"`
	Kind           string      `json:"type"`
	NotificationID *string     `json:"notification_id"`
	Item           *InboxItem  `json:"item"`
	Counts         InboxCounts `json:"counts"`
	CreatedAt      time.Time   `json:"created_at"`
	// Late (item.created only) says the item's sequence is below the highest
	// already in the inbox: it became due before items written ahead of it (its
	// delivery was retried) and goes where its sequence places it, not on top.
	Late *bool `json:"late,omitempty"`
}

// InboxEventRetention is how many of a user's latest events the log keeps; a
// stream further behind is told to refetch.
const InboxEventRetention = 1000

// InboxNotifyChannel is the PostgreSQL NOTIFY channel every inbox change is
// announced on (after commit). A payload names the affected users, grouped by
// tenant, one tenant per line: "tenant_id<TAB>user_id<TAB>user_id…" (ids hold
// no whitespace: validID). A change that names more users than one payload
// holds is announced with several NOTIFYs (InboxNotifyPayloads), never with a
// "wake everyone": a 500-recipient campaign batch wakes those 500 users'
// streams and no other.
const InboxNotifyChannel = "herald_inbox"

// maxNotifyPayload keeps a NOTIFY payload under PostgreSQL's 8000-byte limit.
const maxNotifyPayload = 7900

// NotifyKey is how the hub keys one user's inbox.
func NotifyKey(tenantID, userID string) string { return tenantID + "\t" + userID }

// InboxNotifyPayloads encodes the users (sorted by tenant, then user, as
// insertInboxItems orders them; any order works, sorted is just smaller) into
// as few payloads as fit maxNotifyPayload each.
func InboxNotifyPayloads(tenants, users []string) []string {
	var out []string
	var b strings.Builder
	tenant := ""
	for i := range users {
		t, u := tenants[i], users[i]
		switch {
		case b.Len() > 0 && t == tenant && b.Len()+1+len(u) <= maxNotifyPayload:
			b.WriteByte('\t')
		case b.Len() > 0 && b.Len()+1+len(t)+1+len(u) <= maxNotifyPayload:
			b.WriteByte('\n')
			b.WriteString(t)
			b.WriteByte('\t')
		default:
			if b.Len() > 0 {
				out = append(out, b.String())
				b.Reset()
			}
			b.WriteString(t)
			b.WriteByte('\t')
		}
		b.WriteString(u)
		tenant = t
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// DecodeInboxNotify calls wake for every (tenant, user) a payload names.
func DecodeInboxNotify(payload string, wake func(tenantID, userID string)) {
	for line := range strings.SplitSeq(payload, "\n") {
		tenant, users, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		for u := range strings.SplitSeq(users, "\t") {
			wake(tenant, u)
		}
	}
}

// NewInboxItem is one inbox item to deliver.
type NewInboxItem struct {
	TenantID       string
	UserID         string
	NotificationID string
	Title          string
	Body           string
	ActionURL      string
	Category       string
	CreatedAt      time.Time
}

// DeliverToInbox stores the inbox row and marks the in_app channel delivered, in one
// transaction. A second call for the same notification is a no-op that returns
// inserted=false: insertInboxItems' existence check, under the user's inbox_state
// row lock, is the in-app delivery guard (the primary key, which holds the
// notification's due number, its backstop).
func (s *Store) DeliverToInbox(ctx context.Context, item NewInboxItem) (inserted bool, err error) {
	err = s.InTx(ctx, func(tx *Store) error {
		ins, err := tx.insertInboxItems(ctx, []NewInboxItem{item})
		if err != nil {
			return err
		}
		inserted = ins[0]
		provider := "inbox"
		_, err = tx.UpdateDelivery(ctx, item.TenantID, item.NotificationID, herald.ChannelInApp, DeliveryUpdate{
			Status: herald.DeliveryDelivered, Provider: &provider, CountAttempt: inserted,
		})
		return err
	})
	return inserted, err
}

// InsertInboxItems stores many inbox items in one transaction, with their
// events and counts, and announces them with one NOTIFY for the whole batch
// (campaigns write through it, so a campaign does not flood the listeners).
// inserted[i] says whether items[i] was new; an item already in the inbox (same
// tenant, user and notification) is left alone. It does not touch deliveries.
func (s *Store) InsertInboxItems(ctx context.Context, items []NewInboxItem) (inserted []bool, err error) {
	if len(items) == 0 {
		return nil, nil
	}
	err = s.InTx(ctx, func(tx *Store) error {
		inserted, err = tx.insertInboxItems(ctx, items)
		return err
	})
	return inserted, err
}

type userKey struct{ tenantID, userID string }

// insertInboxItems runs inside a transaction: lock the users' state rows (in a
// fixed order, so concurrent batches cannot deadlock), find which items are
// new, apply the inbox cap as it will be with them, insert the new items that
// stay with their item.created events (the row carries its event: ev_seq,
// ev_at, the counts after it, late; docs/inbox.md#the-event-log), append the
// removal events, store the counts, prune old events, NOTIFY once.
func (s *Store) insertInboxItems(ctx context.Context, items []NewInboxItem) ([]bool, error) {
	users := map[userKey]*inboxState{}
	var keys []userKey
	for _, it := range items {
		k := userKey{it.TenantID, it.UserID}
		if _, ok := users[k]; !ok {
			users[k] = nil
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b userKey) int {
		return cmp.Or(cmp.Compare(a.tenantID, b.tenantID), cmp.Compare(a.userID, b.userID))
	})
	tenants, userIDs := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		tenants[i], userIDs[i] = k.tenantID, k.userID
	}
	states, err := s.lockInboxStates(ctx, tenants, userIDs, true)
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		users[k] = &states[i]
	}

	// Which items are new, and their due sequences (assigned when they became
	// due, before they could render). The users' state rows are locked: no
	// other write adds their items until commit (every insert comes here).
	n := len(items)
	t, u, id := make([]string, n), make([]string, n), make([]string, n)
	for i, it := range items {
		t[i], u[i], id[i] = it.TenantID, it.UserID, it.NotificationID
	}
	rows, err := s.db.Query(ctx, `
		SELECT COALESCE(s.seq, 0), EXISTS (SELECT 1 FROM inbox i WHERE i.tenant_id = x.t AND i.user_id = x.u AND i.notification_id = x.id)
		FROM unnest($1::text[], $2::text[], $3::bytea[]) WITH ORDINALITY AS x(t, u, id, ord)
		LEFT JOIN notification_sequences s ON s.tenant_id = x.t AND s.notification_id = x.id
		ORDER BY x.ord`, t, u, id)
	if err != nil {
		return nil, err
	}
	type candidate struct {
		i   int // index in items
		due int64
	}
	var cands []candidate
	seen := map[string]bool{}
	for i := 0; rows.Next(); i++ {
		var due int64
		var exists bool
		if err := rows.Scan(&due, &exists); err != nil {
			rows.Close()
			return nil, err
		}
		k := t[i] + "\x00" + u[i] + "\x00" + id[i]
		if exists || seen[k] {
			continue // already in the inbox, or twice in the batch: inserted once
		}
		seen[k] = true
		cands = append(cands, candidate{i, due})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	inserted := make([]bool, n)

	// Keep the newest items of each user within the cap, the new ones
	// included (a new item older than the cap's edge is never written: it is
	// counted inserted, for the delivery, but never shown). A write with
	// nothing new applies it too (the excess of a cap made smaller).
	ct, cu, cid, cdue := make([]string, len(cands)), make([]string, len(cands)), make([]string, len(cands)), make([]int64, len(cands))
	for j, c := range cands {
		ct[j], cu[j], cid[j], cdue[j] = t[c.i], u[c.i], id[c.i], c.due
	}
	removed, gone, err := s.capInboxesWith(ctx, tenants, userIDs, ct, cu, cid, cdue)
	if err != nil {
		return nil, err
	}
	events, evUsers := applyInboxRemovals(removed, users, func(removedInboxItem) bool { return true })

	// The new items' item.created events, after the removals' (the cap made
	// room for them), carried by their rows.
	var rt, ru, rid, rtitle, rbody, rurl, rcat []string
	var rat []time.Time
	var rdue, rseq []int64
	var rtotal, runread, runseen []int32
	var rlate []bool
	for _, c := range cands {
		it := items[c.i]
		inserted[c.i] = true
		if gone[t[c.i]+"\x00"+u[c.i]+"\x00"+id[c.i]] {
			continue
		}
		st := users[userKey{it.TenantID, it.UserID}]
		item := InboxItem{NotificationID: it.NotificationID, Sequence: c.due}
		st.counts.add(nil, &item)
		st.seq++
		st.changed = true
		late := c.due > 0 && c.due < st.dueSeq
		st.dueSeq = max(st.dueSeq, c.due)
		rt, ru, rid = append(rt, it.TenantID), append(ru, it.UserID), append(rid, it.NotificationID)
		rtitle, rbody, rurl, rcat = append(rtitle, it.Title), append(rbody, it.Body), append(rurl, it.ActionURL), append(rcat, it.Category)
		rat, rdue, rseq = append(rat, it.CreatedAt), append(rdue, c.due), append(rseq, st.seq)
		rtotal, runread, runseen = append(rtotal, int32(st.counts.Total)), append(runread, int32(st.counts.Unread)), append(runseen, int32(st.counts.Unseen))
		rlate = append(rlate, late)
	}
	if len(rt) > 0 {
		// ev_at is the transaction's time, as an inbox_events row's created_at.
		// The users' age bounds (inbox_state.oldest_at, see PruneInboxAge) move
		// down to an item older than theirs; unknown ('-infinity') stays unknown.
		var added int64
		err := s.db.QueryRow(ctx, `
			WITH ins AS (
				INSERT INTO inbox (tenant_id, user_id, notification_id, title, body, action_url, category, created_at, due_seq,
				                   ev_seq, ev_at, ev_total, ev_unread, ev_unseen, ev_late)
				SELECT x.t, x.u, x.id, x.title, x.body, NULLIF(x.url, ''), x.cat, x.at, x.due, x.seq, now(), x.total, x.unread, x.unseen, x.late
				FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[], $5::text[], $6::text[], $7::text[], $8::timestamptz[],
				            $9::bigint[], $10::bigint[], $11::int[], $12::int[], $13::int[], $14::boolean[])
				     AS x(t, u, id, title, body, url, cat, at, due, seq, total, unread, unseen, late)
				ON CONFLICT DO NOTHING
				RETURNING tenant_id, user_id, created_at
			), bound AS (
				UPDATE inbox_state s SET oldest_at = b.at
				FROM (SELECT tenant_id, user_id, min(created_at) AS at FROM ins GROUP BY tenant_id, user_id) b
				WHERE s.tenant_id = b.tenant_id AND s.user_id = b.user_id AND b.at < s.oldest_at
			)
			SELECT count(*) FROM ins`,
			rt, ru, rid, rtitle, rbody, rurl, rcat, rat, rdue, rseq, rtotal, runread, runseen, rlate).Scan(&added)
		if err != nil {
			return nil, err
		}
		if added != int64(len(rt)) {
			// Cannot happen under the state locks; its events would be wrong.
			return nil, fmt.Errorf("inbox insert: %d of %d new items were already there", len(rt)-int(added), len(rt))
		}
	}
	if len(events) > 0 {
		if err := s.appendInboxEvents(ctx, evUsers, events); err != nil {
			return nil, err
		}
	}
	var changed []userKey
	var changedStates []inboxState
	for _, k := range keys {
		if st := users[k]; st.changed {
			changed = append(changed, k)
			changedStates = append(changedStates, *st)
		}
	}
	if len(changed) == 0 {
		return inserted, nil
	}
	if err := s.saveInboxStates(ctx, changed, changedStates); err != nil {
		return nil, err
	}
	return inserted, s.notifyInbox(ctx, changed)
}

// inboxState is a user's locked inbox_state row.
type inboxState struct {
	seq    int64
	counts InboxCounts
	// dueSeq is the highest due sequence in the inbox.
	dueSeq  int64
	changed bool
}

// lockInboxStates locks the users' state rows (creating missing ones when
// create: a user without one has no item, so its age bound is 'infinity'), in
// the order given (which callers sort), returning them in that order; a
// missing row is herald.ErrNotFound.
func (s *Store) lockInboxStates(ctx context.Context, tenants, users []string, create bool) ([]inboxState, error) {
	if create {
		if _, err := s.db.Exec(ctx, `
		INSERT INTO inbox_state (tenant_id, user_id, oldest_at)
		SELECT t, u, 'infinity' FROM unnest($1::text[], $2::text[]) AS x(t, u)
		ORDER BY t, u
		ON CONFLICT DO NOTHING`, tenants, users); err != nil {
			return nil, err
		}
	}
	rows, err := s.db.Query(ctx, `
		SELECT s.tenant_id, s.user_id, s.seq, s.total, s.unread, s.unseen, s.due_seq
		FROM inbox_state s JOIN unnest($1::text[], $2::text[]) AS x(t, u) ON s.tenant_id = x.t AND s.user_id = x.u
		ORDER BY s.tenant_id, s.user_id
		FOR UPDATE OF s`, tenants, users)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := map[userKey]inboxState{}
	for rows.Next() {
		var k userKey
		var st inboxState
		if err := rows.Scan(&k.tenantID, &k.userID, &st.seq, &st.counts.Total, &st.counts.Unread, &st.counts.Unseen, &st.dueSeq); err != nil {
			return nil, err
		}
		got[k] = st
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]inboxState, len(tenants))
	for i := range tenants {
		st, ok := got[userKey{tenants[i], users[i]}]
		if !ok {
			return nil, fmt.Errorf("inbox state of %s/%s: %w", tenants[i], users[i], herald.ErrNotFound)
		}
		out[i] = st
	}
	return out, nil
}

// saveInboxStates stores the users' new seq and counts.
func (s *Store) saveInboxStates(ctx context.Context, keys []userKey, states []inboxState) error {
	n := len(keys)
	t, u := make([]string, n), make([]string, n)
	seq, total, unread, unseen, due := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, k := range keys {
		t[i], u[i] = k.tenantID, k.userID
		seq[i], total[i], unread[i], unseen[i] = states[i].seq, states[i].counts.Total, states[i].counts.Unread, states[i].counts.Unseen
		due[i] = states[i].dueSeq
	}
	_, err := s.db.Exec(ctx, `
		UPDATE inbox_state s SET seq = x.seq, total = x.total, unread = x.unread, unseen = x.unseen, due_seq = x.due
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[]) AS x(t, u, seq, total, unread, unseen, due)
		WHERE s.tenant_id = x.t AND s.user_id = x.u`, t, u, seq, total, unread, unseen, due)
	if err != nil {
		return err
	}
	// Keep the last InboxEventRetention events of each user.
	_, err = s.db.Exec(ctx, `
		DELETE FROM inbox_events e USING unnest($1::text[], $2::text[], $3::bigint[]) AS x(t, u, seq)
		WHERE e.tenant_id = x.t AND e.user_id = x.u AND e.seq <= x.seq - $4`, t, u, seq, InboxEventRetention)
	return err
}

// removedInboxItem is one item an inbox cap or age limit deleted.
type removedInboxItem struct {
	key  userKey
	id   string
	item InboxItem
}

// InboxCapPerWrite bounds how many of a user's items past the cap one inbox
// write deletes. A write adds one item a user (a campaign page, rarely more),
// so at the cap it deletes what it adds; a cap made smaller since (a tenant's
// inbox_items lowered) leaves an excess that writes take away this many at a
// time and maintenance walks (PruneInboxCaps), instead of the first write
// deleting it all in its transaction. Meanwhile ListInbox shows the newest
// cap only.
const InboxCapPerWrite = 25

// inboxKeepSQL is the cap of the tenant $1: the operator's $N (%[1]s), or the
// tenant's own smaller one.
const inboxKeepSQL = `LEAST(%[1]s::int, COALESCE((SELECT NULLIF((retention->>'inbox_items')::int, 0) FROM tenant_settings WHERE tenant_id = $1), %[1]s::int))`

// capInboxUsersSQL is the users ($1, $2: tenants, users, in the order given)
// a cap statement walks, each with its cap: the operator's $3, or the tenant's
// own smaller one.
const capInboxUsersSQL = `u AS (
		SELECT x.t, x.u, x.ord, LEAST($3::int, COALESCE(NULLIF((s.retention->>'inbox_items')::int, 0), $3::int)) AS keep
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(t, u, ord) LEFT JOIN tenant_settings s ON s.tenant_id = x.t
	)`

// capInboxSQL deletes, for each user ($1, $2), up to $4 of the items past the
// newest keep in the feed's order (due_seq, then notification_id, newest
// first; docs/inbox-order.md), nearest the edge first, and at most $5 in all
// (users in the order given): keep is the operator's cap $3, or the tenant's
// own smaller one. Each user's walk is keep + $4 entries of the primary key
// (tenant_id, user_id, due_seq, notification_id), read backwards.
const capInboxSQL = `
	WITH ` + capInboxUsersSQL + `, excess AS (
		SELECT u.t, u.u, c.due_seq, c.notification_id FROM u CROSS JOIN LATERAL (
			SELECT due_seq, notification_id FROM inbox WHERE tenant_id = u.t AND user_id = u.u
			ORDER BY due_seq DESC, notification_id DESC OFFSET u.keep LIMIT $4) c
		-- The sort is not stable: the feed's order is spelled out again.
		ORDER BY u.ord, c.due_seq DESC, c.notification_id DESC LIMIT $5
	)
	-- By the whole primary key (due_seq included): one probe an item.
	DELETE FROM inbox i USING excess WHERE i.tenant_id = excess.t AND i.user_id = excess.u AND i.due_seq = excess.due_seq
		AND i.notification_id = excess.notification_id
	RETURNING i.tenant_id, i.user_id, i.notification_id, i.read_at, i.seen_at, i.archived_at`

// capInboxWithSQL is capInboxSQL over each user's items and the new ones
// about to be inserted ($6 … $9: tenant, user, notification id, due sequence),
// as they will be together: it deletes the existing items past the edge and
// names (fresh: true) the new ones that would fall past it, which are not
// inserted. Each user's walk is keep + $4 entries of the primary key merged with
// its new items.
const capInboxWithSQL = `
	WITH ` + capInboxUsersSQL + `, fresh AS (
		SELECT * FROM unnest($6::text[], $7::text[], $8::bytea[], $9::bigint[]) AS f(t, u, id, due)
	), excess AS (
		SELECT u.t, u.u, c.due_seq, c.notification_id, c.fresh FROM u CROSS JOIN LATERAL (
			(SELECT due_seq, notification_id, false AS fresh FROM inbox WHERE tenant_id = u.t AND user_id = u.u
			 UNION ALL
			 SELECT f.due, f.id, true FROM fresh f WHERE f.t = u.t AND f.u = u.u)
			ORDER BY due_seq DESC, notification_id DESC OFFSET u.keep LIMIT $4) c
		-- The sort is not stable: the feed's order is spelled out again.
		ORDER BY u.ord, c.due_seq DESC, c.notification_id DESC LIMIT $5
	), del AS (
		DELETE FROM inbox i USING excess
		WHERE NOT excess.fresh AND i.tenant_id = excess.t AND i.user_id = excess.u AND i.due_seq = excess.due_seq
			AND i.notification_id = excess.notification_id
		RETURNING i.tenant_id, i.user_id, i.notification_id, i.read_at, i.seen_at, i.archived_at
	)
	SELECT tenant_id, user_id, notification_id, read_at, seen_at, archived_at, false FROM del
	UNION ALL
	SELECT t, u, notification_id, NULL, NULL, NULL, true FROM excess WHERE fresh`

// capInboxesWith is capInboxes (InboxCapPerWrite a user) with the new items
// (ft, fu, fid, fdue) counted in: it returns the existing items it deleted and
// the keys (tenant, user, notification id joined by NUL) of the new ones past
// the edge.
func (s *Store) capInboxesWith(ctx context.Context, tenants, users, ft, fu, fid []string, fdue []int64) ([]removedInboxItem, map[string]bool, error) {
	rows, err := s.db.Query(ctx, capInboxWithSQL, tenants, users, s.inboxCap, InboxCapPerWrite, len(users)*InboxCapPerWrite, ft, fu, fid, fdue)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var removed []removedInboxItem
	gone := map[string]bool{}
	for rows.Next() {
		var it removedInboxItem
		var fresh bool
		if err := rows.Scan(&it.key.tenantID, &it.key.userID, &it.id, &it.item.ReadAt, &it.item.SeenAt, &it.item.ArchivedAt, &fresh); err != nil {
			return nil, nil, err
		}
		if fresh {
			gone[it.key.tenantID+"\x00"+it.key.userID+"\x00"+it.id] = true
			continue
		}
		it.item.NotificationID = it.id
		removed = append(removed, it)
	}
	return removed, gone, rows.Err()
}

// capInboxes applies the inbox cap to the users (whose state rows the caller
// holds locked), deleting at most perUser items of each and total in all, and
// returns what it deleted.
func (s *Store) capInboxes(ctx context.Context, tenants, users []string, perUser, total int) ([]removedInboxItem, error) {
	return s.removeInboxItems(ctx, capInboxSQL, tenants, users, s.inboxCap, perUser, total)
}

// removeInboxItems runs a DELETE … RETURNING tenant_id, user_id,
// notification_id, read_at, seen_at, archived_at and collects the rows.
func (s *Store) removeInboxItems(ctx context.Context, q string, args ...any) ([]removedInboxItem, error) {
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (removedInboxItem, error) {
		var it removedInboxItem
		err := r.Scan(&it.key.tenantID, &it.key.userID, &it.id, &it.item.ReadAt, &it.item.SeenAt, &it.item.ArchivedAt)
		it.item.NotificationID = it.id
		return it, err
	})
}

// applyInboxRemovals takes the removed items that counted (counted) out of
// their users' locked counts and returns one InboxItemsRemoved event per user
// that lost any, with the counts after.
func applyInboxRemovals(removed []removedInboxItem, users map[userKey]*inboxState, counted func(removedInboxItem) bool) ([]InboxEvent, []userKey) {
	var events []InboxEvent
	var evUsers []userKey
	touched := map[userKey]bool{}
	var order []userKey
	for _, r := range removed {
		if !counted(r) {
			continue
		}
		st := users[r.key]
		st.counts.add(&r.item, nil)
		if !touched[r.key] {
			touched[r.key] = true
			order = append(order, r.key)
		}
	}
	for _, k := range order {
		st := users[k]
		st.seq++
		st.changed = true
		events = append(events, InboxEvent{Seq: st.seq, Kind: herald.InboxItemsRemoved, Counts: st.counts})
		evUsers = append(evUsers, k)
	}
	return events, evUsers
}

// storedInboxItem is an event's item as inbox_events.item holds it (migration
// 0121): short keys, no notification id (the event's notification_id column
// holds it) and no null fields, about a third of InboxItem's JSON. The stream
// sends the InboxItem it decodes to, so clients see the same JSON as before.
type storedInboxItem struct {
	Title      string     `json:"t"`
	Body       string     `json:"b"`
	ActionURL  *string    `json:"u,omitempty"`
	Category   string     `json:"c,omitempty"`
	CreatedAt  time.Time  `json:"at"`
	Sequence   int64      `json:"s,omitempty"`
	ReadAt     *time.Time `json:"r,omitempty"`
	SeenAt     *time.Time `json:"n,omitempty"`
	ArchivedAt *time.Time `json:"a,omitempty"`
}

func storeInboxItem(it *InboxItem) storedInboxItem {
	return storedInboxItem{Title: it.Title, Body: it.Body, ActionURL: it.ActionURL, Category: it.Category, CreatedAt: it.CreatedAt,
		Sequence: it.Sequence, ReadAt: it.ReadAt, SeenAt: it.SeenAt, ArchivedAt: it.ArchivedAt}
}

func (s storedInboxItem) item(notificationID *string) *InboxItem {
	it := &InboxItem{Title: s.Title, Body: s.Body, ActionURL: s.ActionURL, Category: s.Category, CreatedAt: s.CreatedAt,
		Sequence: s.Sequence, ReadAt: s.ReadAt, SeenAt: s.SeenAt, ArchivedAt: s.ArchivedAt}
	if notificationID != nil {
		it.NotificationID = *notificationID
	}
	return it
}

// appendInboxEvents inserts events; users[i] owns events[i].
func (s *Store) appendInboxEvents(ctx context.Context, users []userKey, events []InboxEvent) error {
	n := len(events)
	t, u, kind, nid := make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
	seq, total, unread, unseen := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	items, late := make([][]byte, n), make([]bool, n)
	for i, e := range events {
		t[i], u[i], kind[i], nid[i] = users[i].tenantID, users[i].userID, e.Kind, e.NotificationID
		late[i] = e.Late != nil && *e.Late
		seq[i], total[i], unread[i], unseen[i] = e.Seq, e.Counts.Total, e.Counts.Unread, e.Counts.Unseen
		if e.Item != nil {
			raw, err := json.Marshal(storeInboxItem(e.Item))
			if err != nil {
				return err
			}
			items[i] = raw
		}
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO inbox_events (tenant_id, user_id, seq, kind, notification_id, item, total, unread, unseen, late)
		SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bytea[], $6::jsonb[], $7::bigint[], $8::bigint[], $9::bigint[], $10::boolean[])`,
		t, u, seq, kind, nid, items, total, unread, unseen, late)
	return err
}

// notifyInbox announces the users' changes, delivered at commit: one NOTIFY
// per InboxNotifyPayloads payload (one for any batch of short ids), in one
// statement.
func (s *Store) notifyInbox(ctx context.Context, users []userKey) error {
	if len(users) == 0 {
		return nil
	}
	tenants, ids := make([]string, len(users)), make([]string, len(users))
	for i, k := range users {
		tenants[i], ids[i] = k.tenantID, k.userID
	}
	_, err := s.db.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, InboxNotifyChannel, InboxNotifyPayloads(tenants, ids))
	return err
}

// InboxCursor is the keyset position after which the next page starts: the
// last item's due sequence and notification id.
type InboxCursor struct {
	Sequence       int64
	NotificationID string
}

// InboxQuery selects a page of a user's inbox, newest (highest due sequence) first. Nil filters match
// everything; Archived nil means unarchived items only (the feed).
type InboxQuery struct {
	TenantID string
	UserID   string
	Limit    int
	Read     *bool
	Seen     *bool
	Archived *bool
	Category *string
	After    *InboxCursor
}

const inboxColumns = `notification_id, title, body, action_url, category, created_at, due_seq, read_at, seen_at, archived_at`

func scanInboxItem(row interface{ Scan(...any) error }, it *InboxItem) error {
	return row.Scan(&it.NotificationID, &it.Title, &it.Body, &it.ActionURL, &it.Category, &it.CreatedAt, &it.Sequence, &it.ReadAt, &it.SeenAt, &it.ArchivedAt)
}

// ListInbox returns up to q.Limit items and whether more follow.
func (s *Store) ListInbox(ctx context.Context, q InboxQuery) (items []InboxItem, more bool, err error) {
	args := []any{q.TenantID, q.UserID, q.Limit + 1}
	where := ""
	switch {
	case q.Archived == nil || !*q.Archived:
		where += " AND archived_at IS NULL"
	default:
		where += " AND archived_at IS NOT NULL"
	}
	if q.Read != nil {
		where += map[bool]string{true: " AND read_at IS NOT NULL", false: " AND read_at IS NULL"}[*q.Read]
	}
	if q.Seen != nil {
		where += map[bool]string{true: " AND seen_at IS NOT NULL", false: " AND seen_at IS NULL"}[*q.Seen]
	}
	if q.Category != nil {
		args = append(args, *q.Category)
		where += fmt.Sprintf(" AND category = $%d", len(args))
	}
	if q.After != nil {
		args = append(args, q.After.Sequence, q.After.NotificationID)
		where += fmt.Sprintf(" AND (due_seq, notification_id) < ($%d, $%d)", len(args)-1, len(args))
	}
	// Only the newest cap items of the user are shown: the excess of a cap
	// made smaller is deleted a bounded number at a time (InboxCapPerWrite).
	args = append(args, s.inboxCap)
	rows, err := s.db.Query(ctx, `
		WITH edge AS (
			SELECT due_seq, notification_id FROM inbox WHERE tenant_id = $1 AND user_id = $2
			ORDER BY due_seq DESC, notification_id DESC OFFSET `+fmt.Sprintf(inboxKeepSQL, fmt.Sprintf("$%d", len(args)))+` - 1 LIMIT 1
		)
		SELECT `+inboxColumns+`
		FROM inbox WHERE tenant_id = $1 AND user_id = $2`+where+`
		AND NOT EXISTS (SELECT 1 FROM edge WHERE (inbox.due_seq, inbox.notification_id) < (edge.due_seq, edge.notification_id))
		ORDER BY due_seq DESC, notification_id DESC LIMIT $3`, args...)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var it InboxItem
		if err := scanInboxItem(rows, &it); err != nil {
			return nil, false, err
		}
		items = append(items, it)
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	if len(items) > q.Limit {
		return items[:q.Limit], true, nil
	}
	return items, false, nil
}

// GetInboxCounts returns a user's counters and last event seq (zeros for a user
// whose inbox never had an item).
func (s *Store) GetInboxCounts(ctx context.Context, tenantID, userID string) (InboxCounts, int64, error) {
	var c InboxCounts
	var seq int64
	err := s.db.QueryRow(ctx, `SELECT total, unread, unseen, seq FROM inbox_state WHERE tenant_id = $1 AND user_id = $2`,
		tenantID, userID).Scan(&c.Total, &c.Unread, &c.Unseen, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return InboxCounts{}, 0, nil
	}
	return c, seq, err
}

// RecountInbox counts a user's inbox from its rows (what the counters must equal).
func (s *Store) RecountInbox(ctx context.Context, tenantID, userID string) (InboxCounts, error) {
	var c InboxCounts
	err := s.db.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE archived_at IS NULL),
		       count(*) FILTER (WHERE archived_at IS NULL AND read_at IS NULL),
		       count(*) FILTER (WHERE archived_at IS NULL AND seen_at IS NULL)
		FROM inbox WHERE tenant_id = $1 AND user_id = $2`, tenantID, userID).Scan(&c.Total, &c.Unread, &c.Unseen)
	return c, err
}

// CountInbox counts a user's inbox rows for one notification (tests and audits).
func (s *Store) CountInbox(ctx context.Context, tenantID, userID, notificationID string) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, `SELECT count(*) FROM inbox WHERE tenant_id = $1 AND user_id = $2 AND notification_id = $3`,
		tenantID, userID, notificationID).Scan(&n)
	return n, err
}

// MarkInboxRead sets read_at (and seen_at) once; reading twice keeps the first time.
func (s *Store) MarkInboxRead(ctx context.Context, tenantID, userID, notificationID string) (InboxItem, error) {
	it, _, err := s.UpdateInboxItem(ctx, tenantID, userID, notificationID, herald.InboxActionRead)
	return it, err
}

// UpdateInboxItem applies one action (herald.InboxActions) to one item and
// returns the item and the counts after it. An action that changes nothing (read
// twice) returns the item as it is and appends no event. Read marks the item
// seen too; unread keeps it seen.
func (s *Store) UpdateInboxItem(ctx context.Context, tenantID, userID, notificationID, action string) (InboxItem, InboxCounts, error) {
	var it InboxItem
	var counts InboxCounts
	err := s.InTx(ctx, func(tx *Store) error {
		states, err := tx.lockInboxStates(ctx, []string{tenantID}, []string{userID}, false)
		if err != nil {
			return err // no state row: the user never had an item
		}
		st := &states[0]
		if err := scanInboxItem(tx.db.QueryRow(ctx, `SELECT `+inboxColumns+` FROM inbox
			WHERE tenant_id = $1 AND user_id = $2 AND notification_id = $3 FOR UPDATE`, tenantID, userID, notificationID), &it); err != nil {
			return dbx.NotFound(err)
		}
		before := it
		now := time.Now().UTC().Truncate(time.Microsecond)
		switch action {
		case herald.InboxActionSeen:
			it.SeenAt = cmp.Or(it.SeenAt, &now)
		case herald.InboxActionRead:
			it.ReadAt, it.SeenAt = cmp.Or(it.ReadAt, &now), cmp.Or(it.SeenAt, &now)
		case herald.InboxActionUnread:
			it.ReadAt = nil
		case herald.InboxActionArchive:
			it.ArchivedAt = cmp.Or(it.ArchivedAt, &now)
		case herald.InboxActionUnarchive:
			it.ArchivedAt = nil
		default:
			return fmt.Errorf("unknown inbox action %q", action)
		}
		counts = st.counts
		if same(before.ReadAt, it.ReadAt) && same(before.SeenAt, it.SeenAt) && same(before.ArchivedAt, it.ArchivedAt) {
			return nil
		}
		if _, err := tx.db.Exec(ctx, `UPDATE inbox SET read_at = $4, seen_at = $5, archived_at = $6
			WHERE tenant_id = $1 AND user_id = $2 AND notification_id = $3`,
			tenantID, userID, notificationID, it.ReadAt, it.SeenAt, it.ArchivedAt); err != nil {
			return err
		}
		st.counts.add(&before, &it)
		st.seq++
		counts = st.counts
		k := userKey{tenantID, userID}
		id, item := notificationID, it
		if err := tx.appendInboxEvents(ctx, []userKey{k}, []InboxEvent{{Seq: st.seq, Kind: herald.InboxItemUpdated,
			NotificationID: &id, Item: &item, Counts: st.counts}}); err != nil {
			return err
		}
		if err := tx.saveInboxStates(ctx, []userKey{k}, []inboxState{*st}); err != nil {
			return err
		}
		return tx.notifyInbox(ctx, []userKey{k})
	})
	return it, counts, err
}

func same(a, b *time.Time) bool { return (a == nil) == (b == nil) }

// MarkAllInbox marks every unarchived item of a user read (read=true: also
// seen) or seen, and returns the counts after it and how many items changed.
// It appends one event when any did.
func (s *Store) MarkAllInbox(ctx context.Context, tenantID, userID string, read bool) (InboxCounts, int64, error) {
	var counts InboxCounts
	var changed int64
	err := s.InTx(ctx, func(tx *Store) error {
		states, err := tx.lockInboxStates(ctx, []string{tenantID}, []string{userID}, false)
		if errors.Is(err, herald.ErrNotFound) {
			return nil // the user never had an item: nothing to mark
		}
		if err != nil {
			return err
		}
		st := &states[0]
		kind := herald.InboxAllSeen
		var wasUnread, wasUnseen int64
		if read {
			kind = herald.InboxAllRead
			err = tx.db.QueryRow(ctx, `
				WITH upd AS (
					UPDATE inbox i SET read_at = now(), seen_at = COALESCE(i.seen_at, now())
					FROM (SELECT due_seq, notification_id, seen_at IS NULL AS unseen FROM inbox
					      WHERE tenant_id = $1 AND user_id = $2 AND archived_at IS NULL AND read_at IS NULL FOR UPDATE) old
					WHERE i.tenant_id = $1 AND i.user_id = $2 AND i.due_seq = old.due_seq AND i.notification_id = old.notification_id
					RETURNING old.unseen)
				SELECT count(*), count(*) FILTER (WHERE unseen) FROM upd`, tenantID, userID).Scan(&wasUnread, &wasUnseen)
			changed = wasUnread
		} else {
			var tag interface{ RowsAffected() int64 }
			tag, err = tx.db.Exec(ctx, `UPDATE inbox SET seen_at = now()
				WHERE tenant_id = $1 AND user_id = $2 AND archived_at IS NULL AND seen_at IS NULL`, tenantID, userID)
			if err == nil {
				wasUnseen = tag.RowsAffected()
				changed = wasUnseen
			}
		}
		if err != nil {
			return err
		}
		st.counts.Unread -= wasUnread
		st.counts.Unseen -= wasUnseen
		counts = st.counts
		if changed == 0 {
			return nil
		}
		st.seq++
		k := userKey{tenantID, userID}
		if err := tx.appendInboxEvents(ctx, []userKey{k}, []InboxEvent{{Seq: st.seq, Kind: kind, Counts: st.counts}}); err != nil {
			return err
		}
		if err := tx.saveInboxStates(ctx, []userKey{k}, []inboxState{*st}); err != nil {
			return err
		}
		return tx.notifyInbox(ctx, []userKey{k})
	})
	return counts, changed, err
}

// InboxEventsAfter returns a page of a user's events with seq > after, oldest
// first: at most limit events and, past the first (always returned, whatever
// its size), at most maxBytes of items (their JSON) in all, measured in
// PostgreSQL so no more than that is ever sent to the process. cut reports
// that events were left out for the byte budget (the caller is a page or more
// behind). The log keeps the last InboxEventRetention: when the first one
// returned is not after+1, the ones between were pruned.
//
// The events are the stored ones (inbox_events) merged in seq order with the
// item.created events the inbox rows carry (ev_seq, written by
// insertInboxItems since 0155; docs/inbox.md#the-event-log), kept to the same
// last InboxEventRetention. A created event goes with its item (the cap, the
// age limit, erasure), which leaves a hole in the seqs: the stream refetches
// on any hole, not only before the first (api inboxStream.page). A derived
// event shows the item as it was created (read_at, seen_at, archived_at
// null): the events after it (item.updated, all.read, …) bring it up to date.
func (s *Store) InboxEventsAfter(ctx context.Context, tenantID, userID string, after int64, limit, maxBytes int) (events []InboxEvent, cut bool, err error) {
	// A user's inbox rows are read by the primary key's (tenant_id, user_id)
	// prefix, which the cap bounds (docs/inbox.md#the-event-log), and only
	// when the user's log has moved past after.
	rows, err := s.db.Query(ctx, `
		WITH stored AS (
			SELECT seq, kind, notification_id, item, total, unread, unseen, created_at, late,
			       NULL::text AS title, NULL::text AS body, NULL::text AS action_url, NULL::text AS category,
			       NULL::timestamptz AS item_at, NULL::bigint AS due_seq, COALESCE(octet_length(item::text), 0) AS size
			FROM inbox_events WHERE tenant_id = $1 AND user_id = $2 AND seq > $3 ORDER BY seq LIMIT $4
		), derived AS (
			SELECT i.ev_seq AS seq, $6::text AS kind, i.notification_id, NULL::jsonb AS item,
			       i.ev_total::bigint AS total, i.ev_unread::bigint AS unread, i.ev_unseen::bigint AS unseen, i.ev_at AS created_at, i.ev_late AS late,
			       i.title, i.body, i.action_url, i.category, i.created_at AS item_at, i.due_seq,
			       -- The size of its stored form (storedInboxItem), as a stored event's.
			       octet_length(jsonb_strip_nulls(jsonb_build_object('t', i.title, 'b', i.body, 'u', i.action_url,
			           'c', NULLIF(i.category, ''), 'at', i.created_at, 's', NULLIF(i.due_seq, 0)))::text) AS size
			FROM inbox i WHERE i.tenant_id = $1 AND i.user_id = $2
			-- Evaluated once, before the scan (a one-time filter): no row
			-- is read when the user's log has not moved past after.
			AND EXISTS (SELECT 1 FROM inbox_state WHERE tenant_id = $1 AND user_id = $2 AND seq > $3)
			AND i.ev_seq > $3
			AND i.ev_seq > (SELECT seq FROM inbox_state WHERE tenant_id = $1 AND user_id = $2) - $7
			ORDER BY i.ev_seq LIMIT $4
		), page AS (
			SELECT * FROM stored UNION ALL SELECT * FROM derived ORDER BY seq LIMIT $4
		), sized AS (
			SELECT *, sum(size) OVER (ORDER BY seq) AS running, row_number() OVER (ORDER BY seq) AS n, count(*) OVER () AS rows
			FROM page
		)
		SELECT seq, kind, notification_id, item, total, unread, unseen, created_at, late,
		       title, body, action_url, category, item_at, due_seq, rows FROM sized
		WHERE n = 1 OR running <= $5 ORDER BY seq`,
		tenantID, userID, after, limit, maxBytes, herald.InboxItemCreated, InboxEventRetention)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var inPage int64
	for rows.Next() {
		var e InboxEvent
		var item []byte
		var late bool
		var title, body, category *string
		var actionURL *string
		var itemAt *time.Time
		var dueSeq *int64
		if err := rows.Scan(&e.Seq, &e.Kind, &e.NotificationID, &item, &e.Counts.Total, &e.Counts.Unread, &e.Counts.Unseen, &e.CreatedAt, &late,
			&title, &body, &actionURL, &category, &itemAt, &dueSeq, &inPage); err != nil {
			return nil, false, err
		}
		if e.Kind == herald.InboxItemCreated {
			e.Late = &late
		}
		switch {
		case title != nil: // carried by the inbox row: the item as created
			e.Item = &InboxItem{NotificationID: *e.NotificationID, Title: *title, Body: *body, ActionURL: actionURL,
				Category: *category, CreatedAt: itemAt.UTC(), Sequence: *dueSeq}
		case item != nil:
			var stored storedInboxItem
			if err := json.Unmarshal(item, &stored); err != nil {
				return nil, false, err
			}
			e.Item = stored.item(e.NotificationID)
			if stored.CreatedAt.IsZero() {
				// Written in InboxItem's own form (every short form has "at"):
				// by a process of the release before 0121, still running
				// against the new schema during a rolling deploy.
				e.Item = new(InboxItem)
				if err := json.Unmarshal(item, e.Item); err != nil {
					return nil, false, err
				}
			}
		}
		events = append(events, e)
	}
	return events, int64(len(events)) < inPage, rows.Err()
}

// CountInboxForTemplate counts a tenant's inbox rows of one template (load tests).
func (s *Store) CountInboxForTemplate(ctx context.Context, tenantID, templateID string) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, `
		SELECT count(*) FROM inbox i JOIN notifications n ON n.tenant_id = i.tenant_id AND n.id = i.notification_id
		WHERE i.tenant_id = $1 AND n.template_id = $2`, tenantID, templateID).Scan(&n)
	return n, err
}

// InboxBatchItem is one rendered in-app message of DeliverToInboxBatch.
type InboxBatchItem struct {
	UserID         string
	NotificationID string
	Title          string
	Body           string
	ActionURL      string
	// Category is the template's (the inbox filters by it).
	Category string
}

// DeliverToInboxBatch is DeliverToInbox for many notifications at once (a
// campaign page), in one transaction: the inbox rows through insertInboxItems
// (counts and stream events kept, ONE NOTIFY for the whole page; its existence
// check is the in-app guard, so a re-run inserts nothing) and every in_app delivery
// marked delivered. It returns how many rows were new.
func (s *Store) DeliverToInboxBatch(ctx context.Context, tenantID string, items []InboxBatchItem, at time.Time) (inserted int, err error) {
	if len(items) == 0 {
		return 0, nil
	}
	news := make([]NewInboxItem, len(items))
	for i, it := range items {
		news[i] = NewInboxItem{TenantID: tenantID, UserID: it.UserID, NotificationID: it.NotificationID, Title: it.Title,
			Body: it.Body, ActionURL: it.ActionURL, Category: it.Category, CreatedAt: at}
	}
	err = s.InTx(ctx, func(tx *Store) error {
		fresh, err := tx.insertInboxItems(ctx, news)
		if err != nil {
			return err
		}
		us := make([]BulkDeliveryUpdate, len(items))
		for i, it := range items {
			us[i] = BulkDeliveryUpdate{NotificationID: it.NotificationID, Channel: herald.ChannelInApp, Status: herald.DeliveryDelivered, Provider: "inbox"}
			if fresh[i] {
				us[i].Attempts = 1
				inserted++
			}
		}
		return tx.UpdateDeliveries(ctx, tenantID, us)
	})
	return inserted, err
}
