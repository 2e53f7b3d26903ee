// Package ratelimit enforces rate limits whose state lives in PostgreSQL: token
// buckets (per-tenant API limits → 429 with Retry-After; provider-account send rates
// that every worker respects together with Wait) and daily quotas.
//
// # Why PostgreSQL
//
// A limit such as "tenant T: 20 requests/s" or "SendGrid account A: 100 messages/s"
// must hold for the sum of all API replicas and all worker processes, so the state
// cannot live in any one process. Herald already depends on PostgreSQL, so keeping
// the buckets there adds no infrastructure (no Redis to deploy, secure, back up and
// monitor) and uses one clock, the database's: every refill is computed with
// clock_timestamp() on the server, never with a caller's clock, so replicas with
// skewed clocks cannot mint tokens.
//
// # Cost
//
// Take and Quota are each one SQL statement, one round trip: an INSERT … ON CONFLICT
// DO UPDATE … RETURNING on a one-row-per-key table (a HOT update: the primary key is
// the only index and no indexed column changes). They run in autocommit, so a bucket's
// row lock is held only for the statement itself.
//
// Each statement sets synchronous_commit off for its own transaction (set_config with
// is_local, so the session's setting is untouched): the commit does not wait for the
// WAL flush. That is what makes a Take cheap — measured with BenchmarkTake against the
// test database (PostgreSQL 15 on localhost, 2-core VM shared with other work, fsync
// on): 85–150 µs per Take with the asynchronous commit against 0.43–1.8 ms with a
// synchronous one. A refusal costs about the same (80–130 µs). With two goroutines,
// one hot key sustains a Take every ~95 µs of wall time (its callers serialise on the
// row lock) and separate keys one every ~70 µs. The price of the asynchronous commit:
// if the database server crashes, the takes and counts of its last few hundred
// milliseconds (up to 3 × wal_writer_delay) may be forgotten, which can only make a
// limit briefly more lenient; nothing is ever corrupted. The tables stay logged, so
// they survive restarts and reach standbys.
//
// Use a pool (*pgxpool.Pool), not a transaction: inside a transaction the bucket row
// would stay locked until commit, a rollback would give the token back, and the whole
// transaction would commit asynchronously.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/dbx"
)

// Limiter takes tokens from buckets and counts quotas stored in PostgreSQL.
type Limiter struct {
	db dbx.DB
}

// New returns a Limiter on db (normally the service's *pgxpool.Pool; see the
// package comment for why not a transaction).
func New(db dbx.DB) *Limiter { return &Limiter{db: db} }

// takeSQL takes one token from bucket $1 (rate $2 tokens/s, capacity $3) if at least
// one has accumulated, in one statement:
//
//   - A new key starts full: it is inserted with burst-1 tokens.
//   - An existing key is refilled by rate × elapsed (database clock, read after the
//     row lock is held, so concurrent callers see time move forward), capped at burst,
//     and one token is taken — only if the refilled level is ≥ 1 (the ON CONFLICT
//     WHERE). A refused call does not change the row.
//   - A refused call returns no row from the INSERT; the second branch then reads the
//     row (FOR SHARE: the newest version, which this statement already has locked)
//     and returns its current level, from which the caller derives retryAfter.
//   - The async CTE turns off synchronous_commit for this statement's transaction
//     only (see the package comment); the INSERT reads from it so it always runs.
//
// Returns (ok, level): after a take, the tokens left; after a refusal, the level now.
const takeSQL = `
WITH async AS (SELECT set_config('synchronous_commit', 'off', true)),
took AS (
    INSERT INTO rate_limit_buckets AS b (key, tokens, updated_at)
    SELECT $1, $3 - 1, clock_timestamp() FROM async
    ON CONFLICT (key) DO UPDATE
    SET (tokens, updated_at) = (
        SELECT least($3, b.tokens + $2 * extract(epoch FROM greatest(c.now - b.updated_at, interval '0'))::float8) - 1,
               greatest(c.now, b.updated_at)
        FROM (SELECT clock_timestamp() AS now) c)
    WHERE least($3, b.tokens + $2 * extract(epoch FROM greatest(clock_timestamp() - b.updated_at, interval '0'))::float8) >= 1
    RETURNING tokens
)
SELECT true, tokens FROM took
UNION ALL
SELECT false, least($3, cur.tokens + $2 * extract(epoch FROM greatest(clock_timestamp() - cur.updated_at, interval '0'))::float8)
FROM (SELECT tokens, updated_at FROM rate_limit_buckets WHERE key = $1 FOR SHARE) cur
WHERE NOT EXISTS (SELECT FROM took)`

// Take takes one token from the bucket key, which refills at rate tokens per second
// up to burst tokens (a bucket seen for the first time starts full). It reports
// whether a token was taken; if not, retryAfter is how long until one will have
// accumulated (another caller may take it first). Refused calls take nothing.
func (l *Limiter) Take(ctx context.Context, key string, rate float64, burst int) (ok bool, retryAfter time.Duration, err error) {
	if err := checkBucket(rate, burst); err != nil {
		return false, 0, err
	}
	var level float64
	err = l.db.QueryRow(ctx, takeSQL, key, rate, float64(burst)).Scan(&ok, &level)
	if errors.Is(err, pgx.ErrNoRows) {
		// Refused, and the bucket row was created by another caller after this
		// statement's snapshot (only possible in the first instant of a key's life):
		// its level is unknown here but below one token, so one token's time is an
		// upper bound.
		return false, secondsToDuration(1 / rate), nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("rate limit %q: %w", key, err)
	}
	if ok {
		return true, 0, nil
	}
	return false, secondsToDuration((1 - level) / rate), nil
}

// Wait blocks until it has taken a token from the bucket key (see Take) or ctx ends,
// in which case it returns ctx's error. Between attempts it sleeps for the reported
// retryAfter (less the attempt's round trip) plus a little jitter, so waiters that
// were refused together do not all come back at the same instant. Use it where every worker sending through one
// provider account must together stay under "rate messages/s".
func (l *Limiter) Wait(ctx context.Context, key string, rate float64, burst int) error {
	for {
		start := time.Now()
		ok, retryAfter, err := l.Take(ctx, key, rate, burst)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return err
		}
		if ok {
			return nil
		}
		// retryAfter counts from when the database ran the statement; the reply took
		// part of the call's time to get here and the next request will take about
		// as long to get there, so sleeping retryAfter minus the call's duration
		// arrives when the token does. (Arriving a little early costs one refusal with
		// a tiny retryAfter; arriving late wastes tokens whenever the bucket is full.)
		sleep := retryAfter - time.Since(start)
		t := time.NewTimer(max(sleep, 0) + jitter(retryAfter))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// WaitN blocks until it has taken n tokens at once from the bucket key (a batch
// of n messages sent in one provider call, through TakeN), or ctx ends. The
// bucket refills at rate, as for Wait; it may fill up to max(burst, n) tokens,
// so a batch larger than the bucket's usual burst can still go (the average
// stays at rate).
func (l *Limiter) WaitN(ctx context.Context, key string, rate float64, burst, n int) error {
	if n <= 1 {
		return l.Wait(ctx, key, rate, burst)
	}
	burst = max(burst, n)
	for {
		granted, level, err := l.TakeN(ctx, TakeNParams{Key: key, Rate: rate, Burst: burst, Least: n, Most: n})
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return err
		}
		if granted == n {
			return nil
		}
		wait := secondsToDuration((float64(n) - level) / rate)
		t := time.NewTimer(wait + jitter(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// jitter is a random extra wait of up to a tenth of d (at most 5 ms, at least up to
// 100 µs so waiters told "now" still spread out).
func jitter(d time.Duration) time.Duration {
	limit := min(d/20, 2*time.Millisecond) + 100*time.Microsecond
	return rand.N(limit)
}

// Quota counts one call against the daily quota key, for the UTC day that contains
// day (callers pass time.Now(); tests pass a fixed instant): QuotaN reserving
// one. At most limit calls are admitted per key per UTC day; a rejected call is
// not counted. used is the day's count (including this call when ok), resetAt
// the start of the next UTC day.
func (l *Limiter) Quota(ctx context.Context, key string, limit int, day time.Time) (ok bool, used int, resetAt time.Time, err error) {
	granted, used, resetAt, err := l.QuotaN(ctx, key, limit, 1, day)
	return granted > 0, used, resetAt, err
}

// quotaNSQL reserves up to $4 units of quota $1 (limit $3) for day $2: as many as
// asked while plenty is left, an eighth of what is left near the end (at least
// one), never past the limit; nothing once the limit is reached. Returns (ok,
// used, granted): used is the day's count including this reservation.
const quotaNSQL = `
WITH async AS (SELECT set_config('synchronous_commit', 'off', true)),
counted AS (
    INSERT INTO rate_limit_quotas AS q (key, day, used, granted)
    SELECT $1, $2, g, g FROM async, (SELECT least($4, greatest(1, $3 / 8)) AS g) first WHERE $3 >= 1
    ON CONFLICT (key, day) DO UPDATE
    SET used = q.used + least($4, greatest(1, ($3 - q.used) / 8)), granted = least($4, greatest(1, ($3 - q.used) / 8))
    WHERE q.used < $3
    RETURNING used, granted
)
SELECT true, used, granted FROM counted
UNION ALL
SELECT false, coalesce((SELECT used FROM rate_limit_quotas WHERE key = $1 AND day = $2 FOR SHARE), 0), 0
WHERE NOT EXISTS (SELECT FROM counted)`

// QuotaN reserves up to most units of the daily quota key (limit a day) for the
// UTC day containing day, in one statement (see quotaNSQL). granted is how many
// were reserved (0: the quota is used up), used the day's count including them,
// resetAt the start of the next UTC day.
func (l *Limiter) QuotaN(ctx context.Context, key string, limit, most int, day time.Time) (granted, used int, resetAt time.Time, err error) {
	if limit < 0 || limit > math.MaxInt32 || most < 1 {
		return 0, 0, time.Time{}, fmt.Errorf("quota %q: limit %d, reserve %d out of range", key, limit, most)
	}
	start := utcDay(day)
	resetAt = start.AddDate(0, 0, 1)
	var ok bool
	var used32, granted32 int32
	err = l.db.QueryRow(ctx, quotaNSQL, key, dateString(start), int32(limit), int32(min(most, math.MaxInt32))).Scan(&ok, &used32, &granted32)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("quota %q: %w", key, err)
	}
	return int(granted32), int(used32), resetAt, nil
}

// reserveQuotaSQL reserves exactly $4 units of quota $1 (limit $3) for day $2, or
// none when fewer than $4 are left. Returns (ok, used): used is the day's count,
// including the reservation when ok.
const reserveQuotaSQL = `
WITH counted AS (
    INSERT INTO rate_limit_quotas AS q (key, day, used, granted)
    SELECT $1, $2, $4::int, $4::int WHERE $4::int <= $3::int
    ON CONFLICT (key, day) DO UPDATE
    SET used = q.used + $4::int, granted = $4::int
    WHERE q.used + $4::int <= $3::int
    RETURNING used
)
SELECT true, used FROM counted
UNION ALL
SELECT false, coalesce((SELECT used FROM rate_limit_quotas WHERE key = $1 AND day = $2 FOR SHARE), 0)
WHERE NOT EXISTS (SELECT FROM counted)`

// ReserveQuota reserves n units of the daily quota key (limit a day) for the UTC
// day containing day, all or nothing, in one statement: a campaign's whole
// audience counts against the quota the single notifications count against
// (Leases.Quota's reservations are in used, so together they never pass the
// limit). ok is false, and nothing is counted, when fewer than n are left; used
// is the day's count. Unlike Quota it commits synchronously: callers run it in
// a transaction with a record of the reservation (store.MarkCampaignQuota).
func (l *Limiter) ReserveQuota(ctx context.Context, key string, limit, n int, day time.Time) (ok bool, used int, resetAt time.Time, err error) {
	if limit < 0 || limit > math.MaxInt32 || n < 0 || n > math.MaxInt32 {
		return false, 0, time.Time{}, fmt.Errorf("quota %q: limit %d, reserve %d out of range", key, limit, n)
	}
	start := utcDay(day)
	resetAt = start.AddDate(0, 0, 1)
	var used32 int32
	err = l.db.QueryRow(ctx, reserveQuotaSQL, key, dateString(start), int32(limit), int32(n)).Scan(&ok, &used32)
	if err != nil {
		return false, 0, time.Time{}, fmt.Errorf("quota %q: %w", key, err)
	}
	return ok, int(used32), resetAt, nil
}

// QuotaUsed is the day's count of the daily quota key (reservations included;
// 0 when nothing was counted that day), for a check before a reservation.
func (l *Limiter) QuotaUsed(ctx context.Context, key string, day time.Time) (int, error) {
	var used int32
	err := l.db.QueryRow(ctx, `SELECT coalesce((SELECT used FROM rate_limit_quotas WHERE key = $1 AND day = $2), 0)`,
		key, dateString(utcDay(day))).Scan(&used)
	if err != nil {
		return 0, fmt.Errorf("quota %q: %w", key, err)
	}
	return int(used), nil
}

// TenantDayQuotaKey is the key of a tenant's daily quota: POST
// /v1/notifications counts against it (one per accepted request) and so does
// every campaign's audience (reserved when the campaign starts).
func TenantDayQuotaKey(tenantID string) string { return "tenant-day:" + tenantID }

// Prune deletes bucket rows untouched for longer than idle and quota rows for days
// before the UTC day containing before. A pruned bucket comes back full, so idle must
// be at least the longest refill time in use (burst/rate): a bucket idle that long is
// full anyway and pruning it changes nothing.
func (l *Limiter) Prune(ctx context.Context, idle time.Duration, before time.Time) (buckets, quotas int64, err error) {
	tag, err := l.db.Exec(ctx, `DELETE FROM rate_limit_buckets WHERE updated_at < clock_timestamp() - $1::interval`,
		fmt.Sprintf("%d microseconds", idle.Microseconds()))
	if err != nil {
		return 0, 0, fmt.Errorf("prune rate limit buckets: %w", err)
	}
	buckets = tag.RowsAffected()
	tag, err = l.db.Exec(ctx, `DELETE FROM rate_limit_quotas WHERE day < $1::date`, dateString(utcDay(before)))
	if err != nil {
		return buckets, 0, fmt.Errorf("prune rate limit quotas: %w", err)
	}
	return buckets, tag.RowsAffected(), nil
}

// RetryAfterSeconds is d as an HTTP Retry-After value: whole seconds, rounded up, at
// least 1.
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

func checkBucket(rate float64, burst int) error {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return fmt.Errorf("rate limit: rate %v must be a positive number of tokens per second", rate)
	}
	if burst < 1 {
		return fmt.Errorf("rate limit: burst %d must be at least 1", burst)
	}
	return nil
}

// secondsToDuration converts s ≥ 0 to a Duration rounded up to the microsecond (the
// database clock's resolution), so a caller that sleeps that long finds the token.
func secondsToDuration(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	us := math.Ceil(s * 1e6)
	if us >= float64(math.MaxInt64/int64(time.Microsecond)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(us) * time.Microsecond
}

func utcDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

func dateString(day time.Time) string { return day.Format(time.DateOnly) }

// takeRangeSQL is takeSQL for up to $4 whole tokens at once, and at least $5: it takes
// least($4, floor(level)) when the refilled level is at least $5 tokens, records
// that count in granted and returns it; a refused call returns (false, 0, level).
const takeRangeSQL = `
WITH async AS (SELECT set_config('synchronous_commit', 'off', true)),
took AS (
    INSERT INTO rate_limit_buckets AS b (key, tokens, updated_at, granted)
    SELECT $1, $3 - least($4, floor($3)), clock_timestamp(), least($4, floor($3)) FROM async
    ON CONFLICT (key) DO UPDATE
    SET (tokens, updated_at, granted) = (
        SELECT l.level - least($4, floor(l.level)), greatest(c.now, b.updated_at), least($4, floor(l.level))
        FROM (SELECT clock_timestamp() AS now) c,
            LATERAL (SELECT least($3, b.tokens + $2 * extract(epoch FROM greatest(c.now - b.updated_at, interval '0'))::float8) AS level) l)
    WHERE least($3, b.tokens + $2 * extract(epoch FROM greatest(clock_timestamp() - b.updated_at, interval '0'))::float8) >= $5
    RETURNING granted, tokens
)
SELECT true, granted, tokens FROM took
UNION ALL
SELECT false, 0::float8, least($3, cur.tokens + $2 * extract(epoch FROM greatest(clock_timestamp() - cur.updated_at, interval '0'))::float8)
FROM (SELECT tokens, updated_at FROM rate_limit_buckets WHERE key = $1 FOR SHARE) cur
WHERE NOT EXISTS (SELECT FROM took)`

// TakeNParams names a bucket (as Take's arguments do) and how many tokens
// TakeN takes from it.
type TakeNParams struct {
	Key   string
	Rate  float64 // tokens per second
	Burst int     // the bucket's capacity
	Least int     // take none while fewer have accumulated
	Most  int
}

// TakeN takes between Least and Most whole tokens from the bucket (see Take) in
// one statement: as many as there are, at most Most, or none while fewer than
// Least have accumulated. level is the tokens left (after a take) or there
// (after a refusal).
func (l *Limiter) TakeN(ctx context.Context, p TakeNParams) (granted int, level float64, err error) {
	if err := checkBucket(p.Rate, p.Burst); err != nil {
		return 0, 0, err
	}
	if p.Least < 1 || p.Most < p.Least || p.Least > p.Burst {
		return 0, 0, fmt.Errorf("rate limit %q: take %d…%d tokens of a bucket of %d", p.Key, p.Least, p.Most, p.Burst)
	}
	var ok bool
	var g float64
	err = l.db.QueryRow(ctx, takeRangeSQL, p.Key, p.Rate, float64(p.Burst), float64(p.Most), float64(p.Least)).Scan(&ok, &g, &level)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, nil // refused by a row created after the snapshot (see Take)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("rate limit %q: %w", p.Key, err)
	}
	return int(g), level, nil
}
