package api_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// bytesTables are the tables a notification writes to (partitioned ones
// measured over their partitions). sandbox_messages is the sandbox provider's
// record of what it would have sent: a development and test provider, not a
// production cost, so totals are given without it (and with it for the case
// that sends through it).
var bytesTables = []string{"notifications", "deliveries", "delivery_attempts", "inbox", "inbox_events",
	"notification_dedup", "notification_sequences", "provider_receipts", "cap_ledger", "sandbox_messages"}

// bytesPerUserTables hold one row per user, written by a user's first
// notification: reported apart, per user (the seed's inbox holds 100
// notifications a user).
var bytesPerUserTables = []string{"inbox_state", "due_sequences"}

// relSize is one table's bytes, split: heap (main fork, free space and
// visibility maps), TOAST (with its index) and each index by name; and its
// row writes from the statistics (inserted, updated, of which HOT).
type relSize struct {
	heap, toast         int64
	indexes             map[string]int64
	ins, upd, hot, dead int64
	// rows and tuples: the live rows and their bytes (pg_column_size of
	// the row: header and columns), the heap's floor without free or dead
	// space.
	rows, tuples int64
}

func (r relSize) total() int64 {
	t := r.heap + r.toast
	for _, b := range r.indexes {
		t += b
	}
	return t
}

// measureTable reads a table's relSize, summed over its partitions (a plain
// table is its own only partition).
func measureTable(ctx context.Context, t *testing.T, st *store.Store, table string) relSize {
	t.Helper()
	r := relSize{indexes: map[string]int64{}}
	const parts = `(SELECT relid FROM pg_partition_tree($1) UNION SELECT $1::regclass)`
	if err := st.DB().QueryRow(ctx, `
		SELECT COALESCE(sum(pg_relation_size(p.relid, 'main') + pg_relation_size(p.relid, 'fsm') + pg_relation_size(p.relid, 'vm')), 0),
		       COALESCE(sum(CASE WHEN c.reltoastrelid <> 0 THEN pg_total_relation_size(c.reltoastrelid) ELSE 0 END), 0),
		       COALESCE(sum(s.n_tup_ins), 0), COALESCE(sum(s.n_tup_upd), 0), COALESCE(sum(s.n_tup_hot_upd), 0), COALESCE(sum(s.n_dead_tup), 0)
		FROM `+parts+` p JOIN pg_class c ON c.oid = p.relid LEFT JOIN pg_stat_user_tables s ON s.relid = p.relid`, table).
		Scan(&r.heap, &r.toast, &r.ins, &r.upd, &r.hot, &r.dead); err != nil {
		t.Fatal(err)
	}
	if err := st.DB().QueryRow(ctx, `SELECT count(*), COALESCE(sum(pg_column_size(t.*)), 0) FROM `+table+` t`).Scan(&r.rows, &r.tuples); err != nil {
		t.Fatal(err)
	}
	rows, err := st.DB().Query(ctx, `
		SELECT c.relname, (SELECT COALESCE(sum(pg_relation_size(p.relid)), 0) FROM (SELECT relid FROM pg_partition_tree(i.indexrelid) UNION SELECT i.indexrelid) p)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = $1::regclass`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var b int64
		if err := rows.Scan(&name, &b); err != nil {
			t.Fatal(err)
		}
		r.indexes[name] = b
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestBytesPerNotification measures what one notification costs on disk, by
// table (heap, TOAST and each index, summed over a partitioned table's
// partitions, each measured after a VACUUM), sending HERALD_BENCH_BYTES_N notifications (default 2000, to as
// many users) through the API and the worker: in-app only, in-app + email,
// in-app + email + SMS (email and SMS to the SendGrid and Twilio fakes, as a
// production tenant sends them), and in-app + email through the sandbox
// provider (another tenant, with no provider configured), dividing each
// table's growth by their number: what a notification writes. Then the
// first three cases once more, between two runs of the maintenance step
// that compacts closed partitions, without the rows its dedup window and
// its time in flight hold: what it keeps for its retention. Run it alone on
// a quiet database with HERALD_BENCH_BYTES=1 (docs/retention.md#measured).
func TestBytesPerNotification(t *testing.T) {
	if os.Getenv("HERALD_BENCH_BYTES") != "1" {
		t.Skip("set HERALD_BENCH_BYTES=1 to measure bytes per notification")
	}
	n := testenv.EnvInt(t, "HERALD_BENCH_BYTES_N", 2000)
	f := apitest.StartFakes(t)
	h := apitest.Start(t, apitest.Options{Process: f.Process(publicBase, 10*time.Second)})
	h.StartWorkers(1)
	ctx := context.Background()
	providerTenant, providerKey := h.TenantWith("bytes", e2eTemplates...)
	h.ConfigureSendGrid(providerTenant, `{"from":"shop@example.com"}`)
	h.ConfigureTwilio(providerTenant)
	sandboxTenant, sandboxKey := h.TenantWith("bytes-sandbox", e2eTemplates...)
	for _, tenant := range []string{providerTenant, sandboxTenant} {
		users := make([]store.User, n)
		for i := range users {
			id, email, phone, locale := fmt.Sprintf("user-%05d", i), fmt.Sprintf("user-%05d@example.com", i), fmt.Sprintf("+1415555%04d", i), "en-GB"
			users[i] = store.User{UserID: id, Email: &email, Phone: &phone, Locale: &locale}
		}
		if err := h.Store.InsertUsers(ctx, tenant, users); err != nil {
			t.Fatal(err)
		}
	}
	all := append(slices.Clone(bytesTables), bytesPerUserTables...)
	sizes := func() map[string]relSize {
		// VACUUM returns the empty pages at a table's end that concurrent
		// inserts made PostgreSQL add ahead (up to 512 at a time: a run of
		// 1000 notifications would count them, a table in steady state
		// fills them), and marks dead row versions' space free for reuse
		// (still counted: a table carries its dead space). What remains is
		// what a notification costs while autovacuum keeps up.
		for _, table := range all {
			if _, err := h.Store.DB().Exec(ctx, `VACUUM `+table); err != nil {
				t.Fatal(err)
			}
		}
		// The statistics are sent by each backend at most once a second.
		time.Sleep(1500 * time.Millisecond)
		if _, err := h.Store.DB().Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
			t.Fatal(err)
		}
		out := map[string]relSize{}
		for _, table := range all {
			out[table] = measureTable(ctx, t, h.Store, table)
		}
		return out
	}
	cases := []struct {
		name     string
		key      string
		channels []string
	}{
		{"in_app", providerKey, []string{"in_app"}},
		{"in_app+email", providerKey, []string{"in_app", "email"}},
		{"in_app+email+sms", providerKey, []string{"in_app", "email", "sms"}},
		{"in_app+email (sandbox)", sandboxKey, []string{"in_app", "email"}},
	}
	send := func(key string, channels []string) {
		ids := make([]string, n)
		concurrently16(n, func(i int) {
			ids[i] = h.Accept(key, map[string]any{"user_id": fmt.Sprintf("user-%05d", i), "template_id": "order_shipped",
				"channels": channels, "data": map[string]any{"order_id": fmt.Sprintf("o-%d", i)}, "idempotency_key": freshKey("bytes")})
		})
		for _, id := range ids {
			h.AwaitChannel(key, id, herald.ChannelInApp, herald.DeliveryDelivered, "", 5*time.Minute)
			if slices.Contains(channels, "email") {
				h.AwaitChannel(key, id, herald.ChannelEmail, herald.DeliverySent, "", 5*time.Minute)
			}
			if slices.Contains(channels, "sms") {
				h.AwaitChannel(key, id, herald.ChannelSMS, herald.DeliverySent, "", 5*time.Minute)
			}
		}
		if _, err := h.Store.DB().Exec(ctx, `CHECKPOINT`); err != nil {
			t.Logf("checkpoint: %v", err)
		}
	}
	// report logs what the tables grew by from before to after, per
	// notification; leaveOut are tables not counted in the total.
	report := func(title string, before, after map[string]relSize, leaveOut ...string) {
		per := func(b int64) int64 { return b / int64(n) }
		var total, sandbox int64
		var lines []string
		for _, table := range all {
			if slices.Contains(leaveOut, table) {
				continue
			}
			a, b := after[table], before[table]
			d := a.total() - b.total()
			perUser := slices.Contains(bytesPerUserTables, table)
			switch {
			case perUser:
			case table == "sandbox_messages":
				sandbox += d
			default:
				total += d
			}
			if d == 0 && a.ins == b.ins {
				continue
			}
			var idx []string
			for name, ib := range a.indexes {
				if di := ib - b.indexes[name]; di != 0 {
					idx = append(idx, fmt.Sprintf("%s %d", name, per(di)))
				}
			}
			slices.Sort(idx)
			unit := "per notification"
			if perUser {
				unit = "per user, once"
			}
			var tuple int64
			if a.rows > b.rows {
				tuple = (a.tuples - b.tuples) / (a.rows - b.rows)
			}
			lines = append(lines, fmt.Sprintf("  %-24s %5d B %s: heap %d (%d new rows of %d B), toast %d, indexes [%s]; rows inserted %d, updated %d (HOT %d), dead now %d",
				table, per(d), unit, per(a.heap-b.heap), a.rows-b.rows, tuple, per(a.toast-b.toast), strings.Join(idx, ", "), a.ins-b.ins, a.upd-b.upd, a.hot-b.hot, a.dead))
		}
		t.Logf("%s, %d notifications: %d bytes per notification without the sandbox provider's table, %d with it\n%s",
			title, n, per(total), per(total+sandbox), strings.Join(lines, "\n"))
	}
	for _, c := range cases {
		before := sizes()
		send(c.key, c.channels)
		report(c.name, before, sizes())
	}
	// Kept: what a notification costs for the rest of its retention, once
	// its day's partitions are closed and compacted by the maintenance step
	// (store.CompactPartitions, run here with a clock past today's end) and
	// its dedup window has ended (its ledger row deleted; the sequences
	// table only holds notifications in flight). Each case is sent once
	// more between two compactions of today's partitions, so the indexes'
	// growth is what packed pages hold.
	compactToday := func() {
		t.Helper()
		// The previous pass compacted today's partitions (and every other:
		// the clock is a week ahead): unmark them all so the step rebuilds
		// them again.
		if _, err := h.Store.DB().Exec(ctx, `
			DO $$ DECLARE i regclass; BEGIN
				FOR i IN SELECT d.objoid::regclass FROM pg_description d
					WHERE d.classoid = 'pg_class'::regclass AND d.description = '`+store.CompactedComment+`' LOOP
					EXECUTE format('COMMENT ON INDEX %s IS NULL', i);
				END LOOP;
			END $$`); err != nil {
			t.Fatal(err)
		}
		res, err := h.Store.CompactPartitions(ctx, time.Now().Add(store.PartitionAhead+retention.Day), store.CompactLimits{Budget: time.Hour}, &store.DDLStats{}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Indexes {
			if c.Deferred {
				t.Fatalf("%s not compacted: a lock wait timed out", c.Name)
			}
		}
	}
	for _, c := range cases[:3] {
		compactToday()
		before := sizes()
		send(c.key, c.channels)
		compactToday()
		report(c.name+", kept (partitions compacted, dedup window over)", before, sizes(), "notification_dedup", "notification_sequences")
	}
}
