package api

import (
	"context"
	"sync"
	"time"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/workflows"
)

// digestSignals coalesces the signals of concurrent events of one digest key
// into one signal-with-start (group commit, as a database does for commits):
// while a key's signal is in flight, the events that commit meanwhile wait
// for the next one, which carries the highest of their seqs and how many they
// are. One signal is enough for all of them: the digest's close claims every
// unclaimed row of its key up to the highest seq it was told, and each event's
// row committed before it joined the batch. Each event's request still
// answers 202 only after a signal covering its row succeeded (and 503 when it
// failed: the sweeper signals the digest later). A burst of events to one
// digest then costs Temporal one signal per batch instead of one per event.
//
// Hand-written: it is a few lines over a mutex and a map; no library keys
// group commit by an arbitrary string with a per-batch result.
type digestSignals struct {
	send func(ctx context.Context, lane herald.Lane, in workflows.DigestInput, ev contract.DigestEvent) error
	mu   sync.Mutex
	keys map[string]*digestKeySignals
}

// digestKeySignals is one key's batching: whether a signal is in flight, and
// the batch waiting for the next.
type digestKeySignals struct {
	running bool
	next    *digestSignalBatch
}

// digestSignalBatch is the events one signal carries.
type digestSignalBatch struct {
	lane   herald.Lane
	in     workflows.DigestInput
	maxSeq int64
	at     time.Time
	count  int
	done   chan struct{}
	err    error
}

// digestSignalTimeout bounds one coalesced signal (as the accept path's own
// deadline: a request gives up waiting at its deadline either way).
const digestSignalTimeout = 10 * time.Second

func newDigestSignals(send func(ctx context.Context, lane herald.Lane, in workflows.DigestInput, ev contract.DigestEvent) error) *digestSignals {
	return &digestSignals{send: send, keys: map[string]*digestKeySignals{}}
}

// signal returns once a signal covering seq reached the digest (nil), failed
// (its error), or ctx ended.
func (s *digestSignals) signal(ctx context.Context, lane herald.Lane, in workflows.DigestInput, seq int64, at time.Time) error {
	id := workflows.DigestWorkflowID(in.TenantID, in.FlowID, in.UserID, in.Key)
	s.mu.Lock()
	k := s.keys[id]
	if k == nil {
		k = &digestKeySignals{}
		s.keys[id] = k
	}
	if k.next == nil {
		k.next = &digestSignalBatch{lane: lane, in: in, done: make(chan struct{})}
	}
	b := k.next
	b.count++
	b.maxSeq = max(b.maxSeq, seq)
	if at.After(b.at) {
		b.at = at
	}
	if !k.running {
		k.running = true
		go s.run(id, k)
	}
	s.mu.Unlock()
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run sends a key's batches one after the other until none waits.
func (s *digestSignals) run(id string, k *digestKeySignals) {
	for {
		s.mu.Lock()
		b := k.next
		k.next = nil
		if b == nil {
			k.running = false
			delete(s.keys, id)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), digestSignalTimeout)
		b.err = s.send(ctx, b.lane, b.in, contract.DigestEvent{Seq: b.maxSeq, At: b.at, Count: b.count})
		cancel()
		close(b.done)
	}
}
