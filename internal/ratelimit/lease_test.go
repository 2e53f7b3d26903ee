package ratelimit_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/herald-notify/herald/internal/ratelimit"
	"github.com/herald-notify/herald/internal/testenv"
)

// TakeN takes as many whole tokens as there are, at most n, and none below one.
func TestTakeNGrantsWhatThereIs(t *testing.T) {
	l := newLimiter(t)
	ctx := context.Background()
	key := testenv.UniqueName(t, "rl-n")
	const r, burst = 0.001, 10 // refill negligible during the test
	for _, c := range []struct{ least, most, want int }{{4, 4, 4}, {7, 10, 0}, {5, 10, 6}, {1, 5, 0}} {
		got, _, err := l.TakeN(ctx, ratelimit.TakeNParams{Key: key, Rate: r, Burst: burst, Least: c.least, Most: c.most})
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Fatalf("TakeN(%d…%d) = %d, want %d", c.least, c.most, got, c.want)
		}
	}
	for _, bad := range [][2]int{{0, 1}, {2, 1}, {11, 11}} {
		if _, _, err := l.TakeN(ctx, ratelimit.TakeNParams{Key: key, Rate: r, Burst: burst, Least: bad[0], Most: bad[1]}); err == nil {
			t.Fatalf("TakeN(%d…%d) of a bucket of %d accepted", bad[0], bad[1], burst)
		}
	}
}

// A lease hands out its tokens from memory: a bucket of 20 with a lease size of
// 10 costs one round trip per 10 takes and refuses the 21st without asking
// PostgreSQL again until a lease could have refilled.
func TestLeasesServeFromMemoryAndRememberRefusals(t *testing.T) {
	l := newLimiter(t)
	ls := ratelimit.NewLeases(l, time.Second, time.Minute) // lease = rate × 1 s
	key := testenv.UniqueName(t, "rl-lease")
	const r, burst = 10.0, 20
	for i := range burst {
		if ok, _, err := ls.Take(context.Background(), key, r, burst); err != nil || !ok {
			t.Fatalf("take %d: ok=%v err=%v", i+1, ok, err)
		}
	}
	if got := ls.RoundTrips(); got != 2 {
		t.Fatalf("%d round trips for %d takes in leases of 10", got, burst)
	}
	ok, retry, err := ls.Take(context.Background(), key, r, burst)
	if err != nil || ok || retry <= 0 || retry > time.Second {
		t.Fatalf("take past the bucket: ok=%v retry=%v err=%v", ok, retry, err)
	}
	for range 5 {
		if ok, _, _ := ls.Take(context.Background(), key, r, burst); ok {
			t.Fatal("a remembered refusal granted a token")
		}
	}
	if got := ls.RoundTrips(); got != 3 {
		t.Fatalf("refusals after the first cost %d round trips, want none", got-3)
	}
}

// Three replicas (each its own pool and its own leases, as three API processes)
// hammer one tenant bucket at 20,000 tokens/s for about 2 s, starting from an
// empty bucket. Together they are granted 20,000/s within a few percent, with
// one PostgreSQL round trip per many requests.
func TestLeasesHoldTheGlobalLimitAcrossThreeReplicas(t *testing.T) {
	const (
		replicas   = 3
		perReplica = 4
		r          = 20_000.0
		burst      = 2000 // 100 ms of the rate
		duration   = 2 * time.Second
	)
	url := testenv.DatabaseURL(t)
	key := testenv.UniqueName(t, "rl-replicas")
	leases := make([]*ratelimit.Leases, replicas)
	var first *ratelimit.Limiter
	for i := range leases {
		l := ratelimit.New(replicaPool(t, url))
		if first == nil {
			first = l
		}
		leases[i] = ratelimit.NewLeases(l, 0, 0)
	}
	// Empty the bucket so the burst does not count as rate.
	if _, _, err := first.TakeN(context.Background(), ratelimit.TakeNParams{Key: key, Rate: r, Burst: burst, Least: burst, Most: burst}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var granted, refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, replicas*perReplica)
	start := time.Now()
	for _, ls := range leases {
		for range perReplica {
			wg.Go(func() {
				for ctx.Err() == nil {
					ok, retry, err := ls.Take(ctx, key, r, burst)
					switch {
					case err != nil:
						if ctx.Err() == nil {
							errs <- err
						}
						return
					case ok:
						granted.Add(1)
					default: // a polite client: wait as told (bounded, to keep pressure on)
						refused.Add(1)
						time.Sleep(min(retry, 2*time.Millisecond))
					}
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	trips := totalRoundTrips(leases)
	got := float64(granted.Load()) / elapsed.Seconds()
	t.Logf("%d replicas × %d callers, bucket %v/s burst %d: %d granted in %v = %.0f/s (%+.1f %%), %d refused, %d PostgreSQL round trips (%.0f takes per round trip)",
		replicas, perReplica, r, burst, granted.Load(), elapsed.Round(time.Millisecond), got, 100*(got-r)/r, refused.Load(), trips,
		float64(granted.Load())/float64(max(trips, 1)))
	// Never more than the bucket: rate × time plus the one token a statement may
	// round up to. Fewer by the leases held at the end, and by what 12 callers
	// on a loaded 2-CPU machine fail to ask for (−5.9 % seen on a CI run while
	// other packages' tests ran): the bound below catches a limiter that
	// strands tokens, not the machine's speed.
	if got > r*1.01 || got < r*0.85 {
		t.Fatalf("granted %.0f/s across %d replicas, want %v/s (−15 %% … +1 %%)", got, replicas, r)
	}
	if perTrip := float64(granted.Load()) / float64(max(trips, 1)); perTrip < 20 {
		t.Fatalf("only %.1f takes per round trip", perTrip)
	}
}

// BenchmarkTenantLimiterVsFloor: one tenant's bucket, taken from by every CPU at
// once, through Leases (PostgreSQL behind it), against the floor of a bare
// in-memory golang.org/x/time/rate limiter doing the same number of takes in the
// same run. Reports takes/s of both, their ratio, and takes per PostgreSQL round
// trip. The bucket's rate is high enough that nothing is refused.
//
//	go test -run '^$' -bench BenchmarkTenantLimiterVsFloor -benchtime 200000x ./internal/ratelimit/
func BenchmarkTenantLimiterVsFloor(b *testing.B) {
	ls := ratelimit.NewLeases(newLimiter(b), 0, 0)
	key := testenv.UniqueName(b, "rl-bench-lease")
	const r, burst = 1e7, 1_000_000
	floor := rate.NewLimiter(rate.Limit(r), burst)
	workers := runtime.GOMAXPROCS(0) * 4
	run := func(take func() bool) time.Duration {
		var wg sync.WaitGroup
		var next atomic.Int64
		start := time.Now()
		for range workers {
			wg.Go(func() {
				for next.Add(1) <= int64(b.N) {
					if !take() {
						b.Error("refused")
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	ctx := context.Background()
	// Warm both (the first lease, the pool's connections).
	if ok, _, err := ls.Take(ctx, key, r, burst); err != nil || !ok {
		b.Fatal(ok, err)
	}
	b.ResetTimer()
	leased := run(func() bool {
		ok, _, err := ls.Take(ctx, key, r, burst)
		return err == nil && ok
	})
	bare := run(floor.Allow)
	b.StopTimer()
	leasedRate, bareRate := float64(b.N)/leased.Seconds(), float64(b.N)/bare.Seconds()
	b.ReportMetric(leasedRate, "leased_takes/s")
	b.ReportMetric(bareRate, "floor_takes/s")
	b.ReportMetric(leasedRate/bareRate, "ratio")
	b.ReportMetric(float64(b.N)/float64(max(ls.RoundTrips()-1, 1)), "takes/roundtrip")
}

// QuotaN reserves what it is asked for while plenty is left, an eighth of the
// rest near the end, and never past the limit.
func TestQuotaNReservesLessNearTheEnd(t *testing.T) {
	l := newLimiter(t)
	ctx := context.Background()
	key := testenv.UniqueName(t, "quota-n")
	day := time.Date(2030, 3, 14, 9, 0, 0, 0, time.UTC)
	const limit = 100
	var got []int
	total := 0
	for {
		granted, used, _, err := l.QuotaN(ctx, key, limit, 10, day)
		if err != nil {
			t.Fatal(err)
		}
		if granted == 0 {
			if used != limit {
				t.Fatalf("refused at used = %d, want %d", used, limit)
			}
			break
		}
		total += granted
		if used != total {
			t.Fatalf("used = %d after reserving %d", used, total)
		}
		got = append(got, granted)
	}
	// 100/8 = 12 → 10 (asked), …, 30 left → 3, then 3, 2, … 1.
	if total != limit || got[0] != 10 || got[len(got)-1] != 1 {
		t.Fatalf("reservations %v (sum %d), want 10 first, 1 last, sum %d", got, total, limit)
	}
}

// Three replicas with their own pools admit exactly the quota between them (never
// more), with a reservation round trip per many calls.
func TestQuotaLeasesHoldTheQuotaAcrossThreeReplicas(t *testing.T) {
	const (
		replicas   = 3
		perReplica = 4
		limit      = 20_000
	)
	url := testenv.DatabaseURL(t)
	key := testenv.UniqueName(t, "quota-replicas")
	day := time.Date(2030, 3, 14, 12, 0, 0, 0, time.UTC)
	leases := make([]*ratelimit.Leases, replicas)
	for i := range leases {
		leases[i] = ratelimit.NewLeases(ratelimit.New(replicaPool(t, url)), 0, 0)
	}
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, replicas*perReplica)
	for _, ls := range leases {
		for range perReplica {
			wg.Go(func() {
				for refusals := 0; refusals < 50; { // go on until the day's quota is surely gone
					ok, _, _, err := ls.Quota(context.Background(), key, limit, day)
					switch {
					case err != nil:
						errs <- err
						return
					case ok:
						admitted.Add(1)
					default:
						refused.Add(1)
						refusals++
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	trips := totalRoundTrips(leases)
	t.Logf("admitted %d of a quota of %d across %d replicas, %d refusals, %d reservation round trips (%.0f calls each)",
		admitted.Load(), limit, replicas, refused.Load(), trips, float64(admitted.Load())/float64(trips))
	if got := admitted.Load(); got != limit {
		t.Fatalf("admitted %d, want exactly %d (never more; what a replica holds unused runs out with the day's last units)", got, limit)
	}
	if trips > limit/10 {
		t.Fatalf("%d round trips for %d calls: the quota is not leased", trips, limit)
	}
	// The next day starts afresh, and a refusal is answered from memory.
	if ok, used, _, err := leases[0].Quota(context.Background(), key, limit, day.AddDate(0, 0, 1)); err != nil || !ok || used < 1 {
		t.Fatalf("next day: ok=%v used=%d err=%v", ok, used, err)
	}
}

// totalRoundTrips is how many PostgreSQL round trips the replicas' leases made.
func totalRoundTrips(leases []*ratelimit.Leases) int64 {
	var n int64
	for _, ls := range leases {
		n += ls.RoundTrips()
	}
	return n
}
