package store_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// BenchmarkAssignDue is the accept path's write before its 202: the
// notification's row numbered in its user's due sequence (InsertNotification
// with Due: the counter locked by its own statement, then the row, its
// delivery and the counter step, one transaction). 16 goroutines number at
// once: spread over 1,000 users (no lock waits) or all for one user (every
// numbering waits for the one before it to commit). The floor is a SELECT 1
// round trip on the same pool in the same run; report µs/op and assign/floor.
//
//	go test -run '^$' -bench BenchmarkAssignDue -benchtime 3s ./internal/store/
func BenchmarkAssignDue(b *testing.B) {
	pool := testenv.Pool(b)
	st := store.New(pool)
	ctx := context.Background()
	tn, _, err := st.CreateTenant(ctx, "bench-due")
	if err != nil {
		b.Fatal(err)
	}
	var id atomic.Int64
	run := func(b *testing.B, op func(i int64) error) {
		b.SetParallelism(8) // 8 × GOMAXPROCS (2 here): 16 at once
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := op(id.Add(1)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("floor", func(b *testing.B) {
		run(b, func(int64) error { var one int; return pool.QueryRow(ctx, `SELECT 1`).Scan(&one) })
	})
	for _, users := range []int64{1000, 1} {
		b.Run(fmt.Sprintf("users=%d", users), func(b *testing.B) {
			run(b, func(i int64) error {
				return st.InsertNotification(ctx, store.Notification{TenantID: tn.ID, ID: fmt.Sprintf("n%d", i), UserID: fmt.Sprintf("u%d", i%users),
					TemplateID: "tpl", Channels: []herald.Channel{herald.ChannelInApp}, WorkflowID: "wf", RunID: "run", DedupKeyHash: "k",
					Status: herald.NotificationSending, AcceptedAt: time.Now(), Due: true})
			})
		})
	}
}
