package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/schema"
)

// The accepted provider call is carried by the delivery row (migration 0156),
// not stored as a delivery_attempts row: the history shows it after the
// stored failures, numbered as its row was, at the channel's sent_at; counts
// and later numbers include it; a row of an accepted call from before 0156
// is listed once; a "sent" written from a receipt (no call of this run)
// carries none.
func TestAcceptedAttemptCarriedByTheDeliveryRow(t *testing.T) {
	st, tx, ctx := txStoreWithTx(t)
	tn, _ := mustTenant(t, st, ctx)
	now := time.Now().UTC().Truncate(time.Microsecond)
	newNotification := func(key string) string {
		return insertQueuedNotification(t, st, tn.ID, key, now, herald.ChannelInApp, herald.ChannelEmail)
	}
	stored := func(id string) (accepted, other int) {
		t.Helper()
		if err := tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE outcome = 'accepted'), count(*) FILTER (WHERE outcome <> 'accepted')
			FROM delivery_attempts WHERE tenant_id = $1 AND notification_id = $2`, tn.ID, id).Scan(&accepted, &other); err != nil {
			t.Fatal(err)
		}
		return accepted, other
	}
	history := func(id string) []store.Attempt {
		t.Helper()
		hist, err := st.ListAttemptsOf(ctx, tn.ID, id, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(hist[herald.ChannelInApp]) != 0 {
			t.Fatalf("in-app history %v", hist[herald.ChannelInApp])
		}
		return hist[herald.ChannelEmail]
	}
	sendgrid := "sendgrid"
	msg := "503"

	// Retries then success, as guardedSend records them.
	id := newNotification("a")
	for n := 1; n <= 2; n++ {
		if err := st.RecordAttempt(ctx, tn.ID, id, herald.ChannelEmail, store.Attempt{Attempt: n, Provider: sendgrid, Outcome: store.AttemptRetryable, Error: &msg}); err != nil {
			t.Fatal(err)
		}
	}
	carried, err := st.RecordAccepted(ctx, tn.ID, id, herald.ChannelEmail, store.DeliveryUpdate{Status: herald.DeliverySent, Provider: &sendgrid, AcceptedAttempt: 3})
	if err != nil || !carried {
		t.Fatalf("RecordAccepted = %v, %v", carried, err)
	}
	d, err := st.GetDelivery(ctx, tn.ID, id, herald.ChannelEmail)
	if err != nil || d.SentAt == nil {
		t.Fatalf("delivery %+v, %v", d, err)
	}
	hist := history(id)
	if len(hist) != 3 || hist[0].Attempt != 1 || hist[1].Attempt != 2 || hist[1].Outcome != store.AttemptRetryable {
		t.Fatalf("history %+v", hist)
	}
	if a := hist[2]; a.Attempt != 3 || a.Provider != sendgrid || a.Outcome != store.AttemptAccepted || a.Error != nil || !a.At.Equal(*d.SentAt) {
		t.Fatalf("accepted attempt %+v, want 3 sendgrid accepted at %v", a, *d.SentAt)
	}
	if accepted, other := stored(id); accepted != 0 || other != 2 {
		t.Fatalf("%d accepted and %d other rows stored, want 0 and 2", accepted, other)
	}
	if n, err := st.CountAttempts(ctx, tn.ID, id, herald.ChannelEmail); err != nil || n != 3 {
		t.Fatalf("CountAttempts = %d, %v, want 3", n, err)
	}
	// The same record again (a retried write) still carries it; another
	// accepted call (the guard's residual window) is not carried: its caller
	// stores it as a row.
	if carried, err := st.RecordAccepted(ctx, tn.ID, id, herald.ChannelEmail, store.DeliveryUpdate{Status: herald.DeliverySent, Provider: &sendgrid, AcceptedAttempt: 3}); err != nil || !carried {
		t.Fatalf("RecordAccepted again = %v, %v", carried, err)
	}
	if carried, err := st.RecordAccepted(ctx, tn.ID, id, herald.ChannelEmail, store.DeliveryUpdate{Status: herald.DeliverySent, Provider: &sendgrid, AcceptedAttempt: 4}); err != nil || carried {
		t.Fatalf("RecordAccepted of a second call = %v, %v, want not carried", carried, err)
	}
	// A later row is numbered after the carried attempt.
	if err := st.RecordAttempts(ctx, tn.ID, herald.ChannelEmail, now, []store.RecipientAttempt{{NotificationID: id,
		Attempt: store.Attempt{Provider: sendgrid, Outcome: store.AttemptAccepted}}}); err != nil {
		t.Fatal(err)
	}
	if hist := history(id); len(hist) != 4 || hist[3].Attempt != 4 || hist[2].Attempt != 3 {
		t.Fatalf("history after a second accepted call %+v", hist)
	}

	// A campaign's chunk: one failure row, then the accepted call in bulk.
	id = newNotification("b")
	if err := st.RecordAttempts(ctx, tn.ID, herald.ChannelEmail, now, []store.RecipientAttempt{{NotificationID: id,
		Attempt: store.Attempt{Provider: sendgrid, Outcome: store.AttemptRetryable, Error: &msg}}}); err != nil {
		t.Fatal(err)
	}
	applied, err := st.UpdateDeliveriesApplied(ctx, tn.ID, []store.BulkDeliveryUpdate{{NotificationID: id, Channel: herald.ChannelEmail,
		Status: herald.DeliverySent, Provider: sendgrid, ProviderMessageID: "m1", Accepted: true}})
	if err != nil || !applied[0] {
		t.Fatalf("UpdateDeliveriesApplied = %v, %v", applied, err)
	}
	if hist := history(id); len(hist) != 2 || hist[0].Attempt != 1 || hist[1].Attempt != 2 || hist[1].Outcome != store.AttemptAccepted {
		t.Fatalf("campaign history %+v", hist)
	}
	if accepted, other := stored(id); accepted != 0 || other != 1 {
		t.Fatalf("campaign: %d accepted and %d other rows stored, want 0 and 1", accepted, other)
	}

	// A row of an accepted call from before 0156: listed once.
	id = newNotification("c")
	if err := st.RecordAttempt(ctx, tn.ID, id, herald.ChannelEmail, store.Attempt{Attempt: 1, Provider: sendgrid, Outcome: store.AttemptAccepted}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateDelivery(ctx, tn.ID, id, herald.ChannelEmail, store.DeliveryUpdate{Status: herald.DeliverySent, Provider: &sendgrid}); err != nil {
		t.Fatal(err)
	}
	if hist := history(id); len(hist) != 1 || hist[0].Attempt != 1 {
		t.Fatalf("history of an old accepted row %+v", hist)
	}
	if n, err := st.CountAttempts(ctx, tn.ID, id, herald.ChannelEmail); err != nil || n != 1 {
		t.Fatalf("CountAttempts of an old accepted row = %d, %v", n, err)
	}

	// "Sent" from a receipt, and a delivered in-app channel: no attempt.
	id = newNotification("d")
	if err := st.UpdateDeliveries(ctx, tn.ID, []store.BulkDeliveryUpdate{{NotificationID: id, Channel: herald.ChannelEmail,
		Status: herald.DeliverySent, Provider: sendgrid}, {NotificationID: id, Channel: herald.ChannelInApp, Status: herald.DeliveryDelivered}}); err != nil {
		t.Fatal(err)
	}
	if hist := history(id); len(hist) != 0 {
		t.Fatalf("history of a receipt's sent %+v", hist)
	}
}

// The down migration of 0156 turns each carried accepted attempt back into a
// delivery_attempts row (as the code before 0156 wrote it) before it drops
// the column: the history the older code reads is the same. The rows are
// written by today's code on today's schema (it needs the columns of the
// migrations after 0156), then the database goes down through every later
// down file to before 0156.
func TestAcceptedAttemptDownMigrationKeepsTheHistory(t *testing.T) {
	const version = 156
	dbURL, pool, st, tn := databaseAt(t, 0, "accepted-down")
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	id := ids.NotificationID(ids.IdempotencyKeyHash("down"), v7(now, "0123456789abcdef0d"))
	if err := st.InsertNotification(ctx, store.Notification{TenantID: tn.ID, ID: id, UserID: "u1", TemplateID: "t",
		Channels: []herald.Channel{herald.ChannelEmail, herald.ChannelSMS}, WorkflowID: "notification/" + tn.ID + "/down",
		Status: herald.NotificationQueued, AcceptedAt: now}); err != nil {
		t.Fatal(err)
	}
	sendgrid, twilio, msg := "sendgrid", "twilio", "503"
	if err := st.RecordAttempt(ctx, tn.ID, id, herald.ChannelEmail, store.Attempt{Attempt: 1, Provider: sendgrid, Outcome: store.AttemptRetryable, Error: &msg}); err != nil {
		t.Fatal(err)
	}
	for ch, u := range map[herald.Channel]store.DeliveryUpdate{
		herald.ChannelEmail: {Status: herald.DeliverySent, Provider: &sendgrid, AcceptedAttempt: 2},
		herald.ChannelSMS:   {Status: herald.DeliverySent, Provider: &twilio, AcceptedAttempt: 1},
	} {
		if carried, err := st.RecordAccepted(ctx, tn.ID, id, ch, u); err != nil || !carried {
			t.Fatalf("RecordAccepted %s = %v, %v", ch, carried, err)
		}
	}
	before, err := st.ListAttempts(ctx, tn.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.To(dbURL, version-1); err != nil {
		t.Fatal(err)
	}
	// What the code before 0156 reads: the rows, in id order.
	rows, err := pool.Query(ctx, `SELECT channel, attempt, provider, outcome, error, at FROM delivery_attempts
		WHERE tenant_id = $1 AND notification_id = $2 ORDER BY id`, tn.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	after := map[herald.Channel][]store.Attempt{}
	for rows.Next() {
		var ch herald.Channel
		var a store.Attempt
		if err := rows.Scan(&ch, &a.Attempt, &a.Provider, &a.Outcome, &a.Error, &a.At); err != nil {
			t.Fatal(err)
		}
		after[ch] = append(after[ch], a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(before[herald.ChannelEmail]) != 2 || len(before[herald.ChannelSMS]) != 1 {
		t.Fatalf("history before the down migration %+v", before)
	}
	for ch, want := range before {
		got := after[ch]
		if len(got) != len(want) {
			t.Fatalf("%s after the down migration %+v, want %+v", ch, got, want)
		}
		for i := range want {
			w, g := want[i], got[i]
			if g.Attempt != w.Attempt || g.Provider != w.Provider || g.Outcome != w.Outcome || (g.Error == nil) != (w.Error == nil) || !g.At.Equal(w.At) {
				t.Errorf("%s attempt %d after the down migration %+v, want %+v", ch, i+1, g, w)
			}
		}
	}
}

// Which call the delivery row carries: the first accepted call recorded;
// a retried write of that call still carries it; another accepted call (two
// overlapping campaign chunk runs, a redrive whose numbering restarts at 1)
// is not carried, so its caller stores it as a row, and it does not change
// the carried call's provider or message id; nor does a provider receipt
// (of an earlier call whose record was lost, through another provider).
func TestAcceptedAttemptCarriesOneCall(t *testing.T) {
	st, _, ctx := txStoreWithTx(t)
	tn, _ := mustTenant(t, st, ctx)
	now := time.Now().UTC().Truncate(time.Microsecond)
	newNotification := func(key string) string {
		return insertQueuedNotification(t, st, tn.ID, key, now, herald.ChannelEmail)
	}
	wantRow := func(t *testing.T, name, id, provider, messageID string) {
		t.Helper()
		d, err := st.GetDelivery(ctx, tn.ID, id, herald.ChannelEmail)
		if err != nil {
			t.Fatal(err)
		}
		if d.Provider == nil || *d.Provider != provider || d.ProviderMessageID == nil || *d.ProviderMessageID != messageID {
			t.Errorf("%s: the delivery row shows %s %s, want the carried call's %s %s", name, deref(d.Provider), deref(d.ProviderMessageID), provider, messageID)
		}
	}
	wantHistory := func(t *testing.T, name, id string, want ...store.Attempt) {
		t.Helper()
		hist, err := st.ListAttemptsOf(ctx, tn.ID, id, now)
		if err != nil {
			t.Fatal(err)
		}
		got := hist[herald.ChannelEmail]
		if len(got) != len(want) {
			t.Fatalf("%s: history %+v, want %+v", name, got, want)
		}
		for i := range want {
			if got[i].Attempt != want[i].Attempt || got[i].Provider != want[i].Provider || got[i].Outcome != want[i].Outcome {
				t.Errorf("%s: attempt %d is %+v, want %+v", name, i+1, got[i], want[i])
			}
		}
	}
	accepted := func(n int, provider string) store.Attempt {
		return store.Attempt{Attempt: n, Provider: provider, Outcome: store.AttemptAccepted}
	}

	single := func(t *testing.T, id string, n int, provider, messageID string) bool {
		t.Helper()
		carried, err := st.RecordAccepted(ctx, tn.ID, id, herald.ChannelEmail, store.DeliveryUpdate{Status: herald.DeliverySent,
			Provider: &provider, ProviderMessageID: &messageID, AcceptedAttempt: n})
		if err != nil {
			t.Fatal(err)
		}
		return carried
	}

	t.Run("overlapping runs", func(t *testing.T) {
		// Two overlapping chunk runs, both accepted, and a retried write of the first.
		id := newNotification("a")
		bulk := func(provider, messageID string) bool {
			t.Helper()
			carried, err := st.UpdateDeliveriesApplied(ctx, tn.ID, []store.BulkDeliveryUpdate{{NotificationID: id, Channel: herald.ChannelEmail,
				Status: herald.DeliverySent, Provider: provider, ProviderMessageID: messageID, Accepted: true}})
			if err != nil {
				t.Fatal(err)
			}
			return carried[0]
		}
		if !bulk("sendgrid", "m1") {
			t.Fatal("the first accepted call is not carried")
		}
		if bulk("smtp", "m2") {
			t.Fatal("a second run's accepted call is taken for carried: its attempt would be lost")
		}
		if !bulk("sendgrid", "m1") {
			t.Fatal("a retried write of the carried call is not carried")
		}
		wantRow(t, "overlapping runs", id, "sendgrid", "m1")
		if err := st.RecordAttempts(ctx, tn.ID, herald.ChannelEmail, now, []store.RecipientAttempt{{NotificationID: id, Attempt: accepted(0, "smtp")}}); err != nil {
			t.Fatal(err)
		}
		wantHistory(t, "overlapping runs", id, accepted(1, "sendgrid"), accepted(2, "smtp"))
	})
	t.Run("redrive", func(t *testing.T) {
		// A redrive's call: numbered 1 again, another message id.
		id := newNotification("b")
		if !single(t, id, 1, "sendgrid", "r1") {
			t.Fatal("the first accepted call is not carried")
		}
		if !single(t, id, 1, "sendgrid", "r1") {
			t.Fatal("the first accepted call's retried write is not carried")
		}
		if single(t, id, 1, "smtp", "r2") {
			t.Fatal("a redrive's accepted call numbered 1 is taken for the carried one")
		}
		wantRow(t, "redrive", id, "sendgrid", "r1")
	})
	t.Run("receipt of a lost call", func(t *testing.T) {
		// A receipt of a lost earlier call, through another provider, after the
		// failover's call was carried: single and bulk receipt writes.
		for _, bulkReceipt := range []bool{false, true} {
			id := newNotification(map[bool]string{false: "c", true: "d"}[bulkReceipt])
			if !single(t, id, 4, "smtp", "s4") {
				t.Fatal("the failover's call is not carried")
			}
			if bulkReceipt {
				if err := st.UpdateDeliveries(ctx, tn.ID, []store.BulkDeliveryUpdate{{NotificationID: id, Channel: herald.ChannelEmail,
					Status: herald.DeliveryDelivered, Provider: "sendgrid", ProviderMessageID: "g3"}}); err != nil {
					t.Fatal(err)
				}
			} else {
				sendgrid, g3 := "sendgrid", "g3"
				if applied, err := st.UpdateDelivery(ctx, tn.ID, id, herald.ChannelEmail, store.DeliveryUpdate{Status: herald.DeliveryDelivered,
					Provider: &sendgrid, ProviderMessageID: &g3}); err != nil || !applied {
					t.Fatalf("receipt: %v, %v", applied, err)
				}
			}
			wantRow(t, "receipt of a lost call", id, "smtp", "s4")
			wantHistory(t, "receipt of a lost call", id, accepted(4, "smtp"))
		}
	})
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// Reading whether a delivery row carries its accepted attempt reads the
// deliveries partition of the notification's accepted_at, not every one
// (~38): the history (ListAttemptsOf), the numbering of new rows
// (RecordAttempts with the campaign's accepted_at) and the dead letter's
// count (CountAttempts, by the id's run id's window).
func TestCarriedAttemptReadsOneDeliveriesPartition(t *testing.T) {
	st, tx, ctx := txStoreWithTx(t)
	tn, _ := mustTenant(t, st, ctx)
	now := time.Now().UTC().Truncate(time.Microsecond)
	id := ids.NotificationID(ids.IdempotencyKeyHash("probe"), v7(now, "0123456789abcdef0e"))
	if err := st.InsertNotification(ctx, store.Notification{TenantID: tn.ID, ID: id, UserID: "u1", TemplateID: "t",
		Channels: []herald.Channel{herald.ChannelEmail}, WorkflowID: "notification/" + tn.ID + "/probe",
		Status: herald.NotificationQueued, AcceptedAt: now}); err != nil {
		t.Fatal(err)
	}
	sendgrid := "sendgrid"
	if carried, err := st.RecordAccepted(ctx, tn.ID, id, herald.ChannelEmail, store.DeliveryUpdate{Status: herald.DeliverySent, Provider: &sendgrid, AcceptedAttempt: 1}); err != nil || !carried {
		t.Fatalf("RecordAccepted = %v, %v", carried, err)
	}
	var partitions int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'deliveries'::regclass`).Scan(&partitions); err != nil {
		t.Fatal(err)
	}
	if partitions < 4 {
		t.Skipf("%d deliveries partitions: too few to tell", partitions)
	}
	// scans is each deliveries partition's scans so far in this transaction.
	scans := func() map[string]int64 {
		t.Helper()
		rows, err := tx.Query(ctx, `SELECT relname, seq_scan + COALESCE(idx_scan, 0) FROM pg_stat_xact_user_tables
			WHERE relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'deliveries'::regclass)`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int64{}
		for rows.Next() {
			var name string
			var n int64
			if err := rows.Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			out[name] = n
		}
		return out
	}
	probed := func(name string, maxPartitions int, op func() error) {
		t.Helper()
		before := scans()
		if err := op(); err != nil {
			t.Fatal(err)
		}
		n := 0
		for p, c := range scans() {
			if c > before[p] {
				n++
			}
		}
		if n > maxPartitions {
			t.Errorf("%s scanned %d of %d deliveries partitions, want at most %d", name, n, partitions, maxPartitions)
		}
	}
	probed("ListAttemptsOf", 1, func() error {
		hist, err := st.ListAttemptsOf(ctx, tn.ID, id, now)
		if err == nil && len(hist[herald.ChannelEmail]) != 1 {
			t.Errorf("history %+v, want the carried attempt", hist)
		}
		return err
	})
	msg := "503"
	probed("RecordAttempts", 1, func() error {
		return st.RecordAttempts(ctx, tn.ID, herald.ChannelEmail, now, []store.RecipientAttempt{{NotificationID: id,
			Attempt: store.Attempt{Provider: sendgrid, Outcome: store.AttemptRetryable, Error: &msg}}})
	})
	probed("CountAttempts", 2, func() error {
		n, err := st.CountAttempts(ctx, tn.ID, id, herald.ChannelEmail)
		if err == nil && n != 2 {
			t.Errorf("CountAttempts = %d, want 2", n)
		}
		return err
	})
	if hist, err := st.ListAttemptsOf(ctx, tn.ID, id, now); err != nil || len(hist[herald.ChannelEmail]) != 2 || hist[herald.ChannelEmail][1].Attempt != 2 {
		t.Fatalf("history %+v, %v: the row after the carried attempt is not numbered 2", hist, err)
	}
}

// insertQueuedNotification writes a queued notification of user u1 accepted
// at now on the channels, its id made of key (whose first character sets its
// run id apart), and returns the id.
func insertQueuedNotification(t *testing.T, st *store.Store, tenantID, key string, now time.Time, channels ...herald.Channel) string {
	t.Helper()
	id := ids.NotificationID(ids.IdempotencyKeyHash(key), v7(now, "0123456789abcdef0"+key[:1]))
	if err := st.InsertNotification(context.Background(), store.Notification{TenantID: tenantID, ID: id, UserID: "u1", TemplateID: "t",
		Channels: channels, WorkflowID: "notification/" + tenantID + "/" + key, Status: herald.NotificationQueued, AcceptedAt: now}); err != nil {
		t.Fatal(err)
	}
	return id
}
