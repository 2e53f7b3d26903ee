package store_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// BenchmarkAssignDue is the accept path's one added statement: numbering a new
// notification in its user's due sequence (a counter upsert under the user's
// row lock and the number's insert, autocommitted). 16 goroutines number at
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
				_, err := st.AssignDue(ctx, tn.ID, fmt.Sprintf("u%d", i%users), fmt.Sprintf("n%d", i))
				return err
			})
		})
	}
}
