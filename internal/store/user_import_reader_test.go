package store_test

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/store"
)

// stallingSource yields a few rows, then stalls in Next (blocked is closed)
// until release is closed, then ends; it counts its calls and those running.
type stallingSource struct {
	rows             int
	blocked, release chan struct{}
	calls, inNext    atomic.Int64
}

func (s *stallingSource) Next() (store.ImportRow, error) {
	s.inNext.Add(1)
	defer s.inNext.Add(-1)
	n := s.calls.Add(1)
	switch {
	case n <= int64(s.rows):
		return store.ImportRow{UserID: fmt.Sprintf("u%d", n), Topics: []string{"news"}}, nil
	case n == int64(s.rows)+1:
		close(s.blocked)
		<-s.release
	}
	return store.ImportRow{}, io.EOF
}

func (s *stallingSource) Rewind() error { return nil }

// TestImportUsersWaitsForItsReader: when the import's context is cancelled
// while the COPY's reader is inside the source's Next, pgx's CopyFrom returns
// without waiting for its reader goroutine; ImportUsers still returns only once
// that Read has returned (it would otherwise race on the COPY's error and write
// to a side spool already removed), and the source is not read afterwards.
func TestImportUsersWaitsForItsReader(t *testing.T) {
	st, _, ctx := txStoreWithTx(t)
	tn, _ := mustTenant(t, st, ctx)
	src := &stallingSource{rows: 3, blocked: make(chan struct{}), release: make(chan struct{})}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := st.ImportUsers(cctx, tn.ID, src, 0)
		done <- err
	}()
	select {
	case <-src.blocked:
	case err := <-done:
		t.Fatalf("the import ended before its source stalled: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the source was never read past its rows")
	}
	cancel()
	const stall = 500 * time.Millisecond
	go func() {
		time.Sleep(stall)
		close(src.release)
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a cancelled import succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the cancelled import did not return")
	}
	if n := src.inNext.Load(); n != 0 {
		t.Fatalf("ImportUsers returned while its reader was still in Next (%d)", n)
	}
	calls := src.calls.Load()
	time.Sleep(stall)
	if n := src.calls.Load(); n != calls {
		t.Fatalf("the source was read %d more times after ImportUsers returned", n-calls)
	}
}
