package ratelimit

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Leases puts a per-process allowance in front of a Limiter's PostgreSQL
// buckets, so that a hot bucket costs one round trip per many requests instead
// of one per request (one row per tenant updated 45k times a second serialises
// on its row lock: no PostgreSQL survives that).
//
// # How a lease works
//
// Per key the process holds a lease: whole tokens it has already taken from the
// PostgreSQL bucket (TakeN, one statement) and hands out from memory. When the
// lease is empty, one caller takes the next lease while the others wait for it.
// A lease is up to rate × Window tokens (at least 1, at most half the burst, so
// the bucket has room to refill while replicas wait), and is only taken once half
// of it has accumulated: until then the replica refuses and waits for that. So each
// replica makes about 1/Window round trips per second per hot key, whatever the
// request rate, also when the tenant is over its limit — and a bucket of under
// 1/Window tokens per second (or a burst under 4) gets leases of one token:
// exactly the behaviour of Take.
//
// # Why the global limit still holds
//
// Every token handed out was first taken from the one PostgreSQL bucket, so the
// sum over all replicas never exceeds the bucket: rate × time + burst. What leases
// change is only when a token is used, not how many exist: a replica may hold up
// to one lease it has not used yet. Unused tokens expire after TTL (they are not
// given back), which can only make the limit stricter: at most one lease per
// replica per TTL. A refusal is remembered until the bucket will have refilled a
// lease (so a refused flood costs no round trips either), and that wait is what
// the caller is told to retry after.
//
// Daily quotas are leased too (Quota), but a quota lease does not expire: units
// reserved for a UTC day stay good for that whole day.
type Leases struct {
	limiter *Limiter
	window  time.Duration
	ttl     time.Duration
	// leases maps a key to its lease: one small struct per bucket key in use
	// (tenants × limited endpoints), never removed, as tenants are few and
	// known; an unused lease's tokens expire after TTL.
	leases sync.Map
	// quotas maps a quota key to its *quotaLease, like leases.
	quotas sync.Map
	// roundTrips counts TakeN calls (for tests and benchmarks).
	roundTrips atomic.Int64
}

// Lease defaults.
const (
	// DefaultLeaseWindow sizes a lease: rate × 20 ms, so a replica makes at most
	// ~50 round trips a second per key.
	DefaultLeaseWindow = 20 * time.Millisecond
	// DefaultLeaseTTL is how long unused leased tokens stay valid.
	DefaultLeaseTTL = time.Second
)

type lease struct {
	mu           sync.Mutex
	tokens       int
	expires      time.Time
	refusedUntil time.Time
	// rate and burst the refusal was computed for: new limits ask again at once.
	rate     float64
	burst    int
	fetching chan struct{} // non-nil while one caller takes the next lease
}

// NewLeases wraps l. window and ttl of 0 mean DefaultLeaseWindow and DefaultLeaseTTL.
func NewLeases(l *Limiter, window, ttl time.Duration) *Leases {
	if window <= 0 {
		window = DefaultLeaseWindow
	}
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	return &Leases{limiter: l, window: window, ttl: ttl}
}

// Limiter is the PostgreSQL limiter underneath (quotas, provider Waits).
func (ls *Leases) Limiter() *Limiter { return ls.limiter }

// RoundTrips is how many leases this process has taken from PostgreSQL.
func (ls *Leases) RoundTrips() int64 { return ls.roundTrips.Load() }

// LeaseSize is how many tokens one lease of a bucket takes.
func (ls *Leases) LeaseSize(rate float64, burst int) int {
	n := math.Min(math.Floor(rate*ls.window.Seconds()), float64(burst/2))
	if !(n >= 1) { // also NaN
		return 1
	}
	return int(n)
}

func (ls *Leases) lease(key string) *lease {
	if l, ok := ls.leases.Load(key); ok {
		return l.(*lease)
	}
	l, _ := ls.leases.LoadOrStore(key, &lease{})
	return l.(*lease)
}

// Take takes one token for key (bucket: rate tokens/s, burst deep), from the
// process's lease when it has one, else from a new lease. It reports whether a
// token was taken; if not, retryAfter is how long until this process will ask
// PostgreSQL again.
func (ls *Leases) Take(ctx context.Context, key string, rate float64, burst int) (ok bool, retryAfter time.Duration, err error) {
	if err := checkBucket(rate, burst); err != nil {
		return false, 0, err
	}
	l := ls.lease(key)
	for {
		l.mu.Lock()
		now := time.Now()
		if l.tokens > 0 && now.Before(l.expires) {
			l.tokens--
			l.mu.Unlock()
			return true, 0, nil
		}
		if l.rate != rate || l.burst != burst {
			l.rate, l.burst, l.refusedUntil = rate, burst, time.Time{}
		}
		if now.Before(l.refusedUntil) {
			wait := l.refusedUntil.Sub(now)
			l.mu.Unlock()
			return false, wait, nil
		}
		if ch := l.fetching; ch != nil {
			l.mu.Unlock()
			if err := awaitFetch(ctx, ch); err != nil {
				return false, 0, err
			}
			continue
		}
		ch := make(chan struct{})
		l.fetching, l.tokens = ch, 0
		l.mu.Unlock()

		n := ls.LeaseSize(rate, burst)
		least := max(1, n/2)
		ls.roundTrips.Add(1)
		asked := time.Now()
		granted, level, err := ls.limiter.TakeN(ctx, TakeNParams{Key: key, Rate: rate, Burst: burst, Least: least, Most: n})

		l.mu.Lock()
		l.fetching = nil
		close(ch)
		switch {
		case err != nil:
		case granted == 0:
			// Ask again once half a lease will have accumulated (the earliest
			// one could be granted), counted from when the bucket was read.
			retryAfter = secondsToDuration((float64(least) - level) / rate)
			l.refusedUntil = asked.Add(retryAfter)
			retryAfter = max(time.Until(l.refusedUntil), 0)
		default:
			l.tokens, l.expires, ok = granted-1, time.Now().Add(ls.ttl), true
		}
		l.mu.Unlock()
		return ok, retryAfter, err
	}
}

// quotaLease is the part of a key's daily quota this process has reserved and not
// used yet.
type quotaLease struct {
	mu    sync.Mutex
	day   time.Time // the UTC day the units are for
	limit int       // the quota they were reserved under
	units int
	// used is the day's count as PostgreSQL last answered it (reservations of
	// every replica included).
	used         int
	refusedUntil time.Time
	fetching     chan struct{} // non-nil while one caller reserves more
}

// QuotaLeaseSize is how many units one reservation of a quota of limit a day
// asks for: a thousandth of the day (1 to 1000), so a busy tenant costs one
// round trip per thousandth of its quota, and what replicas hold unused when the
// day runs out is small. Near the end PostgreSQL grants less (an eighth of what
// is left, see quotaNSQL).
func QuotaLeaseSize(limit int) int { return min(1000, max(1, limit/1000)) }

// quotaRecheck is how long a refused quota is answered from memory before this
// process asks PostgreSQL again (a quota used up stays so for the day unless the
// operator raises it, which is seen at once: the lease is per limit).
const quotaRecheck = time.Second

// Quota admits one call against the daily quota key (limit calls per UTC day;
// now picks the day), from this process's reservation when it has one, else
// from a new one (Limiter.QuotaN). Every admitted call was reserved in
// PostgreSQL first, so all replicas together never admit more than the limit; a
// replica holds at most one reservation, so near the end of a day's quota a
// call can be refused while another replica still holds units (at most
// QuotaLeaseSize each, usually far fewer). A reservation made under another
// limit or for another day is dropped, never used: only stricter. used is the
// day's count as last read (reservations included), resetAt the next UTC
// midnight.
func (ls *Leases) Quota(ctx context.Context, key string, limit int, now time.Time) (ok bool, used int, resetAt time.Time, err error) {
	if limit < 0 || limit > math.MaxInt32 {
		return false, 0, time.Time{}, fmt.Errorf("quota %q: limit %d out of range", key, limit)
	}
	day := utcDay(now)
	resetAt = day.AddDate(0, 0, 1)
	if limit == 0 {
		return false, 0, resetAt, nil
	}
	v, _ := ls.quotas.Load(key)
	if v == nil {
		v, _ = ls.quotas.LoadOrStore(key, &quotaLease{})
	}
	l := v.(*quotaLease)
	for {
		l.mu.Lock()
		if !l.day.Equal(day) || l.limit != limit {
			l.day, l.limit, l.units, l.refusedUntil = day, limit, 0, time.Time{}
		}
		if l.units > 0 {
			l.units--
			used = l.used
			l.mu.Unlock()
			return true, used, resetAt, nil
		}
		if time.Now().Before(l.refusedUntil) {
			used = l.used
			l.mu.Unlock()
			return false, used, resetAt, nil
		}
		if ch := l.fetching; ch != nil {
			l.mu.Unlock()
			if err := awaitFetch(ctx, ch); err != nil {
				return false, 0, resetAt, err
			}
			continue
		}
		ch := make(chan struct{})
		l.fetching = ch
		l.mu.Unlock()

		ls.roundTrips.Add(1)
		granted, dayUsed, _, err := ls.limiter.QuotaN(ctx, key, limit, QuotaLeaseSize(limit), now)

		l.mu.Lock()
		l.fetching = nil
		close(ch)
		current := l.day.Equal(day) && l.limit == limit
		switch {
		case err != nil:
		case granted == 0:
			if current {
				l.used, l.refusedUntil = dayUsed, time.Now().Add(quotaRecheck)
			}
		default:
			ok = true
			if current {
				l.used, l.units = dayUsed, granted-1
			}
		}
		l.mu.Unlock()
		return ok, dayUsed, resetAt, err
	}
}

// awaitFetch waits until another caller's round trip for the same key (ch closes
// when it is done) has finished, then the caller looks at the lease again.
func awaitFetch(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
