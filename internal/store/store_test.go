package store_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// txStore runs a test inside a transaction that is rolled back at the end, so tests
// leave nothing behind and can run against a shared database.
func txStore(t *testing.T) (*store.Store, context.Context) {
	st, _, ctx := txStoreWithTx(t)
	return st, ctx
}

func txStoreWithTx(t *testing.T) (*store.Store, pgx.Tx, context.Context) {
	t.Helper()
	ctx := context.Background()
	tx, err := testenv.Pool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	tx = dbx.WithNotificationIDs(tx).(pgx.Tx) // the ids in its raw statements as the store passes them
	return store.New(tx), tx, ctx
}

func mustTenant(t *testing.T, st *store.Store, ctx context.Context) (store.Tenant, string) {
	t.Helper()
	tn, key, err := st.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	return tn, key
}

func ptr(s string) *string { return &s }

func TestAPIKeysAreStoredHashedAndResolveToTheirTenant(t *testing.T) {
	st, tx, ctx := txStoreWithTx(t)
	tn, key := mustTenant(t, st, ctx)
	got, err := st.TenantByAPIKey(ctx, key)
	if err != nil || got.ID != tn.ID {
		t.Fatalf("TenantByAPIKey = %v, %v", got, err)
	}
	if _, err := st.TenantByAPIKey(ctx, key+"x"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("wrong key: want ErrNotFound, got %v", err)
	}
	// The raw key is nowhere in the table.
	var n, total int
	if err := tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE key_hash = $1 OR prefix = $2), count(*) FROM api_keys WHERE tenant_id = $3`,
		[]byte(key), key, tn.ID).Scan(&n, &total); err != nil || n != 0 || total != 1 {
		t.Fatalf("raw key stored: %d of %d rows, %v", n, total, err)
	}
	second, err := st.CreateAPIKey(ctx, tn.ID)
	if err != nil || second == key {
		t.Fatalf("second key: %v", err)
	}
	if got, err := st.TenantByAPIKey(ctx, second); err != nil || got.ID != tn.ID {
		t.Fatalf("second key resolves: %v %v", got, err)
	}
}

func TestUsersAreTenantScoped(t *testing.T) {
	st, ctx := txStore(t)
	a, _ := mustTenant(t, st, ctx)
	b, _ := mustTenant(t, st, ctx)
	u, created, err := st.UpsertUser(ctx, store.User{TenantID: a.ID, UserID: "u1", Email: ptr("u1@example.com")})
	if err != nil || !created || *u.Email != "u1@example.com" {
		t.Fatalf("create: %v %v %v", u, created, err)
	}
	u, created, err = st.UpsertUser(ctx, store.User{TenantID: a.ID, UserID: "u1", Phone: ptr("+14155550100")})
	if err != nil || created || u.Email != nil || *u.Phone != "+14155550100" {
		t.Fatalf("replace: %+v %v %v", u, created, err)
	}
	if _, err := st.GetUser(ctx, b.ID, "u1"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("tenant b sees tenant a's user: %v", err)
	}
	if ok, _ := st.UserExists(ctx, b.ID, "u1"); ok {
		t.Fatal("UserExists across tenants")
	}
	if ok, _ := st.UserExists(ctx, a.ID, "u1"); !ok {
		t.Fatal("UserExists misses the user")
	}
}

func newNotification(t *testing.T, st *store.Store, ctx context.Context, tenantID, userID, id string) {
	t.Helper()
	if _, _, err := st.UpsertUser(ctx, store.User{TenantID: tenantID, UserID: userID}); err != nil {
		t.Fatal(err)
	}
	n := store.Notification{TenantID: tenantID, ID: id, UserID: userID, TemplateID: "tpl", Channels: []herald.Channel{herald.ChannelInApp},
		WorkflowID: "wf-" + id, RunID: "run", DedupKeyHash: "k", Status: herald.NotificationQueued, AcceptedAt: time.Now()}
	if err := st.InsertNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	// An activity retry inserts again: nothing changes.
	if err := st.InsertNotification(ctx, n); err != nil {
		t.Fatalf("second insert: %v", err)
	}
}

func TestInboxDeliveryIsIdempotent(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	newNotification(t, st, ctx, tn.ID, "u1", "n1")

	at := time.Now()
	inserted, err := st.DeliverToInbox(ctx, store.NewInboxItem{TenantID: tn.ID, UserID: "u1", NotificationID: "n1", Title: "T", Body: "B", ActionURL: "", CreatedAt: at})
	if err != nil || !inserted {
		t.Fatalf("first delivery: %v %v", inserted, err)
	}
	inserted, err = st.DeliverToInbox(ctx, store.NewInboxItem{TenantID: tn.ID, UserID: "u1", NotificationID: "n1", Title: "T", Body: "B", ActionURL: "", CreatedAt: at})
	if err != nil || inserted {
		t.Fatalf("second delivery must be a no-op: %v %v", inserted, err)
	}
	if c, _ := st.CountInbox(ctx, tn.ID, "u1", "n1"); c != 1 {
		t.Fatalf("inbox rows = %d, want 1", c)
	}
	n, err := st.GetNotification(ctx, tn.ID, "n1")
	if err != nil || len(n.Deliveries) != 1 {
		t.Fatalf("GetNotification: %+v %v", n, err)
	}
	d := n.Deliveries[0]
	if d.Status != herald.DeliveryDelivered || d.Attempts != 1 || d.DeliveredAt == nil || *d.Provider != "inbox" {
		t.Fatalf("delivery row: %+v", d)
	}
}

func TestDeliveryStatusNeverMovesBackwards(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	newNotification(t, st, ctx, tn.ID, "u1", "n1")
	steps := []struct {
		status  herald.DeliveryStatus
		applied bool
	}{
		{herald.DeliverySending, true},
		{herald.DeliverySent, true},
		{herald.DeliveryDelivered, true},
		{herald.DeliverySent, false},    // a late "sent" receipt
		{herald.DeliveryPending, false}, // never back to pending
		{herald.DeliveryDelivered, true},
		{herald.DeliveryFailed, false}, // a bounce never undoes a confirmed delivery
	}
	for _, s := range steps {
		applied, err := st.UpdateDelivery(ctx, tn.ID, "n1", "in_app", store.DeliveryUpdate{Status: s.status})
		if err != nil || applied != s.applied {
			t.Fatalf("update to %s: applied=%v err=%v, want applied=%v", s.status, applied, err, s.applied)
		}
	}
	d, err := st.GetDelivery(ctx, tn.ID, "n1", "in_app")
	if err != nil || d.Status != herald.DeliveryDelivered || d.SentAt == nil {
		t.Fatalf("final: %+v %v", d, err)
	}
}

func TestInboxPagesNewestFirstAndFiltersUnread(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ids := []string{"n1", "n2", "n3", "n4", "n5"}
	for i, id := range ids {
		newNotification(t, st, ctx, tn.ID, "u1", id)
		if _, err := st.DeliverToInbox(ctx, store.NewInboxItem{TenantID: tn.ID, UserID: "u1", NotificationID: id, Title: "T" + id, Body: "B", ActionURL: "", CreatedAt: base.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	q := store.InboxQuery{TenantID: tn.ID, UserID: "u1", Limit: 2}
	for page := 0; page < 5; page++ {
		items, more, err := st.ListInbox(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			got = append(got, it.NotificationID)
		}
		if !more {
			break
		}
		last := items[len(items)-1]
		q.After = &store.InboxCursor{Sequence: last.Sequence, NotificationID: last.NotificationID}
	}
	want := []string{"n5", "n4", "n3", "n2", "n1"}
	if len(got) != len(want) {
		t.Fatalf("pages = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pages = %v, want %v", got, want)
		}
	}
	if _, err := st.MarkInboxRead(ctx, tn.ID, "u1", "n4"); err != nil {
		t.Fatal(err)
	}
	no := false
	unread, _, err := st.ListInbox(ctx, store.InboxQuery{TenantID: tn.ID, UserID: "u1", Limit: 10, Read: &no})
	if err != nil || len(unread) != 4 {
		t.Fatalf("unread = %d items, %v", len(unread), err)
	}
	for _, it := range unread {
		if it.NotificationID == "n4" {
			t.Fatal("read item listed as unread")
		}
	}
	if _, err := st.MarkInboxRead(ctx, "other-tenant", "u1", "n4"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("mark read across tenants: %v", err)
	}
}

func TestBounceAfterSentFailsAndRecomputesTheOverallStatus(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	newNotification(t, st, ctx, tn.ID, "u1", "n1")
	if _, err := st.DeliverToInbox(ctx, store.NewInboxItem{TenantID: tn.ID, UserID: "u1", NotificationID: "n1", Title: "T", Body: "B", ActionURL: "", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.RecomputeNotificationStatus(ctx, tn.ID, "n1"); err != nil || got != herald.NotificationDelivered {
		t.Fatalf("all delivered: %q %v", got, err)
	}
	// Add an email channel that was sent and then bounced.
	addChannel(t, st, ctx, tn.ID, "n1", "email")
	for _, s := range []herald.DeliveryStatus{herald.DeliverySent, herald.DeliveryFailed} {
		if ok, err := st.UpdateDelivery(ctx, tn.ID, "n1", "email", store.DeliveryUpdate{Status: s}); err != nil || !ok {
			t.Fatalf("email -> %s: %v %v", s, ok, err)
		}
	}
	if got, err := st.RecomputeNotificationStatus(ctx, tn.ID, "n1"); err != nil || got != herald.NotificationPartiallyFailed {
		t.Fatalf("one bounced: %q %v", got, err)
	}
	if _, err := st.RecomputeNotificationStatus(ctx, "other", "n1"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("other tenant: %v", err)
	}
}

// addChannel adds a pending delivery row for channel to an existing notification
// through the store's (idempotent) insert path.
func addChannel(t *testing.T, st *store.Store, ctx context.Context, tenantID, id string, channel herald.Channel) {
	t.Helper()
	n, err := st.GetNotification(ctx, tenantID, id)
	if err != nil {
		t.Fatal(err)
	}
	n.Channels = append(n.Channels, channel)
	if err := st.InsertNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// The notification, its delivery rows and its dedup-ledger row are written by one
// statement; a duplicate that reached the ledger first keeps its count, and the
// original fills in its body hash and window. A retry changes nothing.
func TestInsertNotificationWritesTheLedgerRow(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	if _, _, err := st.UpsertUser(ctx, store.User{TenantID: tn.ID, UserID: "u1"}); err != nil {
		t.Fatal(err)
	}
	accepted := time.Now().Truncate(time.Microsecond)
	until := accepted.Add(time.Hour)
	body := []byte("0123456789abcdef0123456789abcdef")
	if o, err := st.RecordDuplicate(ctx, store.RecordDuplicateParams{
		TenantID: tn.ID, NotificationID: "n1", KeyHash: "k", BodyHash: body, SeenAt: accepted.Add(time.Second),
	}); err != nil || !o.Counted || o.BodyKnown {
		t.Fatalf("early duplicate: %+v %v", o, err)
	}
	n := store.Notification{TenantID: tn.ID, ID: "n1", UserID: "u1", TemplateID: "tpl", Channels: []herald.Channel{herald.ChannelEmail, herald.ChannelInApp},
		WorkflowID: "wf", RunID: "run", DedupKeyHash: "k", Status: herald.NotificationSending, AcceptedAt: accepted,
		Dedup: &store.Dedup{KeyHash: "k", BodyHash: body, FirstSeenAt: accepted, DedupUntil: &until}}
	for range 2 { // the second is an activity retry
		if err := st.InsertNotification(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	d, err := st.GetDedup(ctx, tn.ID, "n1")
	switch {
	case err != nil:
		t.Fatal(err)
	case string(d.BodyHash) != string(body) || d.Duplicates != 1 || !d.FirstSeenAt.Equal(accepted) || d.DedupUntil == nil || !d.DedupUntil.Equal(until):
		t.Fatalf("ledger row = %+v", d)
	}
	got, err := st.GetNotification(ctx, tn.ID, "n1")
	if err != nil || len(got.Deliveries) != 2 || got.Deliveries[0].Status != herald.DeliveryPending {
		t.Fatalf("notification = %+v %v", got, err)
	}
	// Without a body hash (a workflow started by hand), no ledger row.
	n.ID, n.Dedup = "n2", nil
	if err := st.InsertNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetDedup(ctx, tn.ID, "n2"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("ledger row without a body hash: %v", err)
	}
}

// An audit entry is written before its change (pending, status 0) and completed
// after: with the answer's status, or removed when nothing changed. One left
// pending is listed as such.
func TestAuditEntriesAreWrittenAhead(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	begin := func(action string) int64 {
		t.Helper()
		id, err := st.BeginAudit(ctx, tn.ID, store.AuditEntry{APIKeyID: "k1", Action: action, Target: "template_id=t"})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	done, refused, crashed := begin("template.put"), begin("template.put"), begin("provider.put")
	if err := st.FinishAudit(ctx, tn.ID, done, 200, true); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishAudit(ctx, tn.ID, refused, 422, false); err != nil {
		t.Fatal(err)
	}
	got, err := st.ListAudit(ctx, tn.ID, store.AuditFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	status := map[int64]int{}
	for _, e := range got {
		status[e.ID] = e.Status
	}
	if len(got) != 2 || status[done] != 200 || status[crashed] != store.AuditPending {
		t.Fatalf("entries = %+v, want %d answered 200 and %d pending; %d (refused) gone", got, done, crashed, refused)
	}
}

// The domain words (herald.Channel, DeliveryStatus, NotificationStatus, Reason)
// are named string types: pgx encodes them as text, alone and in arrays, and
// scans text, text[] and NULL-able text into them.
func TestTypedWordsRoundTrip(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	if _, _, err := st.UpsertUser(ctx, store.User{TenantID: tn.ID, UserID: "u1"}); err != nil {
		t.Fatal(err)
	}
	channels := []herald.Channel{herald.ChannelEmail, herald.ChannelInApp}
	if err := st.InsertNotification(ctx, store.Notification{TenantID: tn.ID, ID: "n1", UserID: "u1", TemplateID: "tpl", Channels: channels,
		WorkflowID: "wf", RunID: "run", DedupKeyHash: "k", Status: herald.NotificationScheduled, AcceptedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	n, err := st.GetNotification(ctx, tn.ID, "n1")
	if err != nil || !slices.Equal(n.Channels, channels) || n.Status != herald.NotificationScheduled || len(n.Deliveries) != 2 {
		t.Fatalf("notification = %+v %v", n, err)
	}
	for _, d := range n.Deliveries {
		if d.Status != herald.DeliveryScheduled || d.Reason == nil || *d.Reason != herald.ReasonSendAt {
			t.Fatalf("%s delivery = %+v", d.Channel, d)
		}
	}

	reason := herald.ReasonQuietHours
	if ok, err := st.UpdateDelivery(ctx, tn.ID, "n1", herald.ChannelEmail, store.DeliveryUpdate{Status: herald.DeliveryScheduled, Reason: &reason}); err != nil || !ok {
		t.Fatalf("UpdateDelivery: %v %v", ok, err)
	}
	if err := st.UpdateDeliveries(ctx, tn.ID, []store.BulkDeliveryUpdate{
		{NotificationID: "n1", Channel: herald.ChannelInApp, Status: herald.DeliveryDelivered, Reason: store.ClearReason, Provider: "inbox"},
	}); err != nil {
		t.Fatal(err)
	}
	guard, err := st.DeliveryStatuses(ctx, tn.ID, []string{"n1"})
	want := map[herald.Channel]store.GuardState{
		herald.ChannelEmail: {Status: herald.DeliveryScheduled, Reason: herald.ReasonQuietHours},
		herald.ChannelInApp: {Status: herald.DeliveryDelivered},
	}
	if err != nil || !maps.Equal(guard["n1"], want) {
		t.Fatalf("DeliveryStatuses = %v %v, want %v", guard, err, want)
	}
	if err := st.RecomputeNotificationStatuses(ctx, tn.ID, []string{"n1"}); err != nil {
		t.Fatal(err)
	}
	if status, _, err := st.NotificationStatus(ctx, tn.ID, "n1"); err != nil || status != herald.NotificationScheduled {
		t.Fatalf("overall status = %q %v, want scheduled", status, err)
	}
	if err := st.RecordAttempt(ctx, tn.ID, "n1", herald.ChannelEmail, store.Attempt{Attempt: 1, Provider: "sandbox", Outcome: store.AttemptAccepted}); err != nil {
		t.Fatal(err)
	}
	if hist, err := st.ListAttempts(ctx, tn.ID, "n1"); err != nil || len(hist[herald.ChannelEmail]) != 1 {
		t.Fatalf("attempts = %v %v", hist, err)
	}
}
