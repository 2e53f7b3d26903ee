package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// TestOrderLaneHandsOffInOrderUnderConcurrency plays the workflows' protocol
// against the real tables with goroutines: 60 notifications take their places
// one after another (as the API does), then all run at once with random
// delays: read whom they are behind, wait for the release "signal" (a channel
// here) if behind anything, "send", release and signal the successor the
// release names. Every send must come in seq order and no wait may time out (a
// missed release). Some notifications are cancelled instead of sent (released
// without sending) while earlier ones are still pending: the ones after them
// must still wait for the earlier ones.
func TestOrderLaneHandsOffInOrderUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	st := store.New(testenv.Pool(t))
	tn, _, err := st.CreateTenant(ctx, "lanes")
	if err != nil {
		t.Fatal(err)
	}
	const n = 60
	claim := func(i int) herald.OrderClaim {
		return herald.OrderClaim{TenantID: tn.ID, UserID: "ada", Channel: herald.ChannelEmail, OrderingKey: "user",
			NotificationID: fmt.Sprintf("n_%02d", i), WorkflowID: fmt.Sprintf("wf-%02d", i), RunID: "run"}
	}
	for i := range n {
		if _, err := st.ClaimOrderHandoffs(ctx, []herald.OrderClaim{claim(i)}, false); err != nil {
			t.Fatal(err)
		}
	}
	signals := make([]chan struct{}, n)
	for i := range signals {
		signals[i] = make(chan struct{}, n)
	}
	byWorkflow := func(wf string) int {
		var i int
		fmt.Sscanf(wf, "wf-%d", &i)
		return i
	}
	var mu sync.Mutex
	var sent []int
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			places, err := st.ClaimOrderHandoffs(ctx, []herald.OrderClaim{claim(i)}, true) // the workflow's read: a place it has
			if err != nil {
				errs <- err
				return
			}
			if places[0].Seq != int64(i+1) {
				errs <- fmt.Errorf("notification %d: seq %d", i, places[0].Seq)
				return
			}
			cancelled := i%7 == 3
			if places[0].Behind != "" && !cancelled {
				select {
				case <-signals[i]:
				case <-time.After(20 * time.Second):
					errs <- fmt.Errorf("notification %d: no release behind %s (missed)", i, places[0].Behind)
					return
				}
			}
			if !cancelled {
				time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
				mu.Lock()
				sent = append(sent, i)
				mu.Unlock()
			}
			next, ok, err := st.ReleaseOrderHandoff(ctx, tn.ID, claim(i).NotificationID, herald.ChannelEmail)
			if err != nil {
				errs <- err
				return
			}
			if ok {
				signals[byWorkflow(next.WorkflowID)] <- struct{}{}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := 0
	for i := range n {
		if i%7 != 3 {
			want++
		}
	}
	if !slices.IsSorted(sent) || len(sent) != want {
		t.Fatalf("sends out of order or missing (want %d in order): %v", want, sent)
	}
	// Everything is done: pruning what was done before now deletes it all, in
	// batches, and the lane with it; a new claim starts a new lane at 1.
	total := 0
	for {
		deleted, err := st.PruneOrderHandoffs(ctx, tn.ID, time.Now().Add(time.Second), 25)
		if err != nil {
			t.Fatal(err)
		}
		if deleted == 0 {
			break
		}
		total += deleted
	}
	if total != n+1 {
		t.Fatalf("pruned %d rows, want %d hand-offs and the lane", total, n)
	}
	places, err := st.ClaimOrderHandoffs(ctx, []herald.OrderClaim{claim(99)}, true)
	if err != nil || places[0].Seq != 1 || places[0].Behind != "" {
		t.Fatalf("a claim after the prune: %v %v", places, err)
	}
}
