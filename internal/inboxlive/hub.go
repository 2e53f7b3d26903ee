// Package inboxlive fans inbox changes out to the open inbox streams of one API
// process. Every inbox change is committed with a PostgreSQL NOTIFY on
// store.InboxNotifyChannel naming the affected users; the Hub holds ONE
// dedicated connection that LISTENs on it and wakes the streams of those users,
// which then read the durable event log from their last event id. A NOTIFY
// carries no data a stream relies on: a missed or duplicated wake-up costs a
// query, never an event, so any number of API replicas (and workers writing the
// inbox) work against one database.
package inboxlive

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/semaphore"

	"github.com/herald-notify/herald/internal/store"
)

// Limits bound the open streams of one process and the memory they hold.
type Limits struct {
	PerUser    int // streams one user may hold open at once
	PerTenant  int // streams one tenant's users may hold open at once
	PerProcess int // streams this process serves at once
	// PageBytes bounds the items of one page a stream reads from its log and
	// writes before reading the next (one event larger than it is read alone);
	// a live stream further behind than one page is a slow client, sent
	// "refetch" and closed.
	PageBytes int
	// MemoryBytes bounds the pages of all streams in flight at once: a stream
	// reserves PageBytes before it reads and waits, holding nothing, while the
	// process is at its bound.
	MemoryBytes int
}

// DefaultLimits are the limits a zero Limits field takes. A page of 1 MiB
// holds at least one item of the largest size (title and body of 256 KiB
// each, escaped); 64 MiB are 64 pages in flight, each written within the
// stream's write timeout.
var DefaultLimits = Limits{PerUser: 5, PerTenant: 2000, PerProcess: 10000, PageBytes: 1 << 20, MemoryBytes: 64 << 20}

// ErrTooManyStreams is returned by Subscribe when a limit is reached; Scope says which.
type ErrTooManyStreams struct{ Scope string }

func (e *ErrTooManyStreams) Error() string { return "too many open inbox streams for this " + e.Scope }

// Sub is one open stream's subscription: Wake receives (coalesced) when the
// user's inbox may have changed.
type Sub struct {
	key    string
	tenant string
	wake   chan struct{}
}

// Wake is signalled when the user's inbox may have new events.
func (s *Sub) Wake() <-chan struct{} { return s.wake }

func (s *Sub) signal() bool {
	select {
	case s.wake <- struct{}{}:
		return true
	default: // a wake-up is already pending: the stream reads everything new anyway
		return false
	}
}

// Hub is one process's listener and its subscriptions.
type Hub struct {
	conn   *pgx.ConnConfig
	limits Limits
	log    *slog.Logger

	mu       sync.Mutex
	subs     map[string]map[*Sub]struct{} // NotifyKey → subscriptions
	tenants  map[string]int
	open     int
	started  bool
	cancel   context.CancelFunc
	done     chan struct{}
	listened atomic.Bool
	wakeups  atomic.Int64
	reads    atomic.Int64

	memory         *semaphore.Weighted
	reserved, peak atomic.Int64
	slow           atomic.Int64
}

// New makes a hub that will listen through its own connection made from conn
// (never from a pool: LISTEN belongs to one session). Nothing runs until the
// first Subscribe.
func New(conn *pgx.ConnConfig, limits Limits, log *slog.Logger) *Hub {
	if limits.PerUser <= 0 {
		limits.PerUser = DefaultLimits.PerUser
	}
	if limits.PerTenant <= 0 {
		limits.PerTenant = DefaultLimits.PerTenant
	}
	if limits.PerProcess <= 0 {
		limits.PerProcess = DefaultLimits.PerProcess
	}
	if limits.PageBytes <= 0 {
		limits.PageBytes = DefaultLimits.PageBytes
	}
	if limits.MemoryBytes <= 0 {
		limits.MemoryBytes = DefaultLimits.MemoryBytes
	}
	limits.PageBytes = min(limits.PageBytes, limits.MemoryBytes)
	return &Hub{conn: conn, limits: limits, log: log, subs: map[string]map[*Sub]struct{}{}, tenants: map[string]int{},
		memory: semaphore.NewWeighted(int64(limits.MemoryBytes))}
}

// PageBytes is the byte bound of one stream page (Limits.PageBytes).
func (h *Hub) PageBytes() int { return h.limits.PageBytes }

// ReservePage reserves one page's bytes of the process's stream memory
// (Limits.MemoryBytes), waiting while it is all reserved (or until ctx ends);
// release gives them back once the page is written.
func (h *Hub) ReservePage(ctx context.Context) (release func(), err error) {
	n := int64(h.limits.PageBytes)
	if err := h.memory.Acquire(ctx, n); err != nil {
		return nil, err
	}
	used := h.reserved.Add(n)
	for {
		peak := h.peak.Load()
		if used <= peak || h.peak.CompareAndSwap(peak, used) {
			break
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			h.reserved.Add(-n)
			h.memory.Release(n)
		})
	}, nil
}

// MemoryReserved is the stream page bytes reserved now; MemoryPeak the most
// ever reserved at once (never above Limits.MemoryBytes).
func (h *Hub) MemoryReserved() int64 { return h.reserved.Load() }

// MemoryPeak: see MemoryReserved.
func (h *Hub) MemoryPeak() int64 { return h.peak.Load() }

// CountSlowClient counts a live stream closed for falling a page behind.
func (h *Hub) CountSlowClient() { h.slow.Add(1) }

// SlowClients is how many streams CountSlowClient counted.
func (h *Hub) SlowClients() int64 { return h.slow.Load() }

// Open is how many streams this process holds open (the "inbox streams open" gauge).
func (h *Hub) Open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open
}

// Listening reports whether the listener connection is up and LISTENing.
func (h *Hub) Listening() bool { return h.listened.Load() }

// Subscribe registers a stream of the user, within the limits; the caller must
// Unsubscribe it when the stream ends.
func (h *Hub) Subscribe(tenantID, userID string) (*Sub, error) {
	key := store.NotifyKey(tenantID, userID)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.open >= h.limits.PerProcess:
		return nil, &ErrTooManyStreams{Scope: "server"}
	case h.tenants[tenantID] >= h.limits.PerTenant:
		return nil, &ErrTooManyStreams{Scope: "tenant"}
	case len(h.subs[key]) >= h.limits.PerUser:
		return nil, &ErrTooManyStreams{Scope: "user"}
	}
	if !h.started {
		h.started = true
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel, h.done = cancel, make(chan struct{})
		go h.listen(ctx)
	}
	s := &Sub{key: key, tenant: tenantID, wake: make(chan struct{}, 1)}
	if h.subs[key] == nil {
		h.subs[key] = map[*Sub]struct{}{}
	}
	h.subs[key][s] = struct{}{}
	h.tenants[tenantID]++
	h.open++
	return s, nil
}

// Unsubscribe removes a stream's subscription.
func (h *Hub) Unsubscribe(s *Sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	set := h.subs[s.key]
	if _, ok := set[s]; !ok {
		return
	}
	delete(set, s)
	if len(set) == 0 {
		delete(h.subs, s.key)
	}
	if h.tenants[s.tenant]--; h.tenants[s.tenant] == 0 {
		delete(h.tenants, s.tenant)
	}
	h.open--
}

// Close stops the listener (streams stay subscribed but are no longer woken).
func (h *Hub) Close() {
	h.mu.Lock()
	cancel, done := h.cancel, h.done
	h.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// wakeAll wakes every stream: after the listener (re)connects, a NOTIFY sent
// while it was away may have been lost.
func (h *Hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.subs {
		for s := range set {
			h.signal(s)
		}
	}
}

// dispatch wakes the streams of the users a NOTIFY names (and no other).
func (h *Hub) dispatch(payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	store.DecodeInboxNotify(payload, func(tenantID, userID string) {
		for s := range h.subs[store.NotifyKey(tenantID, userID)] {
			h.signal(s)
		}
	})
}

// signal wakes one stream, counting the wake-ups that will cost a read (a
// wake-up already pending costs nothing more).
func (h *Hub) signal(s *Sub) {
	if s.signal() {
		h.wakeups.Add(1)
	}
}

// Wakeups is how many stream wake-ups this hub has delivered (each costs the
// stream one read of its log; a coalesced one is not counted).
func (h *Hub) Wakeups() int64 { return h.wakeups.Load() }

// CountRead counts one read of an inbox event log by a stream of this process
// (herald_inbox_stream_reads_total).
func (h *Hub) CountRead() { h.reads.Add(1) }

// Reads is how many log reads this process's streams have made.
func (h *Hub) Reads() int64 { return h.reads.Load() }

// listen keeps one LISTENing connection until ctx is done, reconnecting with
// backoff (1 s doubling to 30 s).
func (h *Hub) listen(ctx context.Context) {
	defer close(h.done)
	backoff := time.Second
	for ctx.Err() == nil {
		err := h.listenOnce(ctx)
		h.listened.Store(false)
		if ctx.Err() != nil {
			return
		}
		h.log.Warn("inbox listener lost its connection; reconnecting", "error", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (h *Hub) listenOnce(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, h.conn.Copy())
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{store.InboxNotifyChannel}.Sanitize()); err != nil {
		return err
	}
	h.listened.Store(true)
	h.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		h.dispatch(n.Payload)
	}
}
