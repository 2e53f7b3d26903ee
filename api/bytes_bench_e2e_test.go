package api_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
)

// bytesTables are the tables a notification writes to (partitioned ones
// measured over their partitions).
var bytesTables = []string{"notifications", "deliveries", "delivery_attempts", "inbox", "inbox_events", "inbox_state",
	"notification_dedup", "notification_sequences", "due_sequences", "sandbox_messages", "provider_receipts", "cap_ledger"}

// TestBytesPerNotification measures what one notification costs on disk, by
// table (heap, TOAST and indexes: pg_total_relation_size, summed over a
// partitioned table's partitions), sending HERALD_BENCH_BYTES_N notifications
// (default 2000, to as many users) through the API and the worker, in-app
// only and then in-app + email (the email through the sandbox provider), and
// dividing each table's growth by their number. Run it alone on a quiet
// database with HERALD_BENCH_BYTES=1 (docs/retention.md#measured).
func TestBytesPerNotification(t *testing.T) {
	if os.Getenv("HERALD_BENCH_BYTES") != "1" {
		t.Skip("set HERALD_BENCH_BYTES=1 to measure bytes per notification")
	}
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("HERALD_BENCH_BYTES_N")); err == nil && v > 0 {
		n = v
	}
	h := apitest.Start(t, apitest.Options{})
	h.StartWorkers(1)
	_, key := h.TenantWith("bytes", e2eTemplates...)
	ctx := context.Background()
	for i := range n {
		h.PutUser(key, fmt.Sprintf("user-%05d", i), map[string]any{"email": fmt.Sprintf("user-%05d@example.com", i), "locale": "en-GB"})
	}
	sizes := func() map[string]int64 {
		out := map[string]int64{}
		for _, table := range bytesTables {
			var b int64
			if err := h.Store.DB().QueryRow(ctx, `SELECT COALESCE(sum(pg_total_relation_size(relid)), 0) FROM pg_partition_tree($1)`, table).Scan(&b); err != nil {
				t.Fatal(err)
			}
			out[table] = b
		}
		return out
	}
	for _, channels := range [][]string{{"in_app"}, {"in_app", "email"}} {
		before := sizes()
		ids := make([]string, n)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for i := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				ids[i] = h.Accept(key, map[string]any{"user_id": fmt.Sprintf("user-%05d", i), "template_id": "order_shipped",
					"channels": channels, "data": map[string]any{"order_id": fmt.Sprintf("o-%d", i)}, "idempotency_key": freshKey("bytes")})
			}()
		}
		wg.Wait()
		for _, id := range ids {
			h.AwaitChannel(key, id, herald.ChannelInApp, herald.DeliveryDelivered, "", 5*time.Minute)
			if len(channels) == 2 {
				h.AwaitChannel(key, id, herald.ChannelEmail, herald.DeliverySent, "", 5*time.Minute)
			}
		}
		if _, err := h.Store.DB().Exec(ctx, `CHECKPOINT`); err != nil {
			t.Logf("checkpoint: %v", err)
		}
		after := sizes()
		var total int64
		var parts []string
		for _, table := range bytesTables {
			d := after[table] - before[table]
			total += d
			if d != 0 {
				parts = append(parts, fmt.Sprintf("%s %d", table, d/int64(n)))
			}
		}
		sort.Strings(parts)
		t.Logf("%s, %d notifications: %d bytes per notification (%s)", strings.Join(channels, "+"), n, total/int64(n), strings.Join(parts, ", "))
	}
}
