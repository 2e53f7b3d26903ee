package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/retention"
)

// The time partitions of the high-volume tables (migration 0102,
// docs/retention.md#time-partitions). The maintenance workflow creates each
// table's partitions ahead of time and detaches and drops those wholly past
// the operator's retention, so expiry never deletes rows one by one. A tenant
// with a shorter retention has its own rows deleted in batches (Prune).

// PartitionedTable is one partitioned table: its partition key column, the
// span of one partition, and the retention that expires it.
type PartitionedTable struct {
	Table  string
	Column string
	// Unit is "day" or "week" (weeks start on Monday, UTC).
	Unit string
	// Keep is how long the operator keeps its rows.
	Keep func(retention.Policy) time.Duration
	// holds, when set, is the query ($1 a partition's start, $2 its end, $3
	// the cut-off, $4 the dead letters' cut-off) that says whether the
	// partition still holds a row of a notification that has not ended or
	// ended after the cut-off, or that an open dead letter younger than $4
	// keeps: the partition is kept while it does (DropPartitions).
	holds string
}

// PartitionedTables lists every partitioned table.
var PartitionedTables = []PartitionedTable{
	{Table: "notifications", Column: "accepted_at", Unit: "day", Keep: func(p retention.Policy) time.Duration { return p.Notifications }, holds: holdsNotificationsSQL},
	// A delivery's accepted_at is its notification's: the partitions of one
	// day hold one day's notifications and their deliveries.
	{Table: "deliveries", Column: "accepted_at", Unit: "day", Keep: func(p retention.Policy) time.Duration { return p.Notifications }, holds: holdsNotificationsSQL},
	{Table: "delivery_attempts", Column: "at", Unit: "day", Keep: func(p retention.Policy) time.Duration { return p.Notifications }, holds: holdsAttemptsSQL},
	{Table: "inbox_events", Column: "created_at", Unit: "week", Keep: func(p retention.Policy) time.Duration { return p.InboxAge }},
	{Table: "audit_log", Column: "at", Unit: "week", Keep: func(p retention.Policy) time.Duration { return p.Audit }},
}

// A notification's history is pruned a retention after it ended, never
// while it is in flight: a send_at further ahead than the retention leaves a
// notification in a partition that is past the cut-off before it is even due.
// The partial index notifications_open_idx (migration 0135) holds the
// notifications not ended and those that ended more than LateEnd after they
// were accepted; any other ended before its partition's end + LateEnd, so a
// partition that ends LateEnd before the cut-off and holds no row of the
// index that is open or ended after the cut-off holds nothing to keep. The
// check probes that small index, never a day of rows.
const LateEnd = time.Hour

// openOrLateSQL is notifications_open_idx's predicate (the planner uses the
// index only for a query that repeats it); keptSQL narrows it to what must
// outlive the cut-off $3.
var (
	openOrLateSQL = `(status IN ` + openStatusesSQL + ` OR updated_at - accepted_at > interval '1 hour')`
	keptSQL       = openOrLateSQL + ` AND (status IN ` + openStatusesSQL + ` OR updated_at >= $3)`
)

// An open or redriving dead letter keeps its notification's partitions, but
// only for a bounded time: while it is younger than the operator's dead-letter
// retention ($4, the cut-off of its created_at). Unbounded, one failing
// tenant's open dead letter a day would keep every day of every tenant's
// history (and PruneOldDeadLetters, which waits for the notification to be
// gone, would never expire the dead letter either). Once past the bound the
// day drops normally, the dead letter is pruned as one whose notification is
// gone, and a redrive in between is refused (410 notification_expired; the
// activity: contract.NotificationExpired).
// The check walks the unresolved dead letters (dead_letters_unresolved_created_idx,
// migration 0140, which replaced 0136's index: a tenant whose provider fails
// piles them up, but only they are read, their created_at from the index, an
// index-only scan), not a day of rows.
const unresolvedDeadLettersSQL = `SELECT tenant_id, notification_id FROM dead_letters WHERE status IN ('` + DeadLetterOpen + `', '` + DeadLetterRedriving + `') AND created_at >= $4`

var (
	attemptClockSkewSQL   = fmt.Sprintf("interval '%d seconds'", int64(AttemptClockSkew/time.Second))
	holdsNotificationsSQL = `SELECT EXISTS (SELECT 1 FROM notifications WHERE accepted_at >= $1 AND accepted_at < $2 AND ` + keptSQL + `)
		OR EXISTS (SELECT 1 FROM (` + unresolvedDeadLettersSQL + `) d WHERE EXISTS (SELECT 1 FROM notifications n
			WHERE n.tenant_id = d.tenant_id AND n.id = d.notification_id AND n.accepted_at >= $1 AND n.accepted_at < $2))`
	// An attempt is made after its notification was accepted, give or take
	// the clocks' skew (AttemptClockSkew: ListAttemptsOf reads an attempt
	// stamped up to that much before accepted_at): the notifications to look
	// at were accepted before the partition's end + AttemptClockSkew.
	holdsAttemptsSQL = `SELECT EXISTS (SELECT 1 FROM notifications n WHERE accepted_at < $2::timestamptz + ` + attemptClockSkewSQL + ` AND ` + keptSQL + `
		AND EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.tenant_id = n.tenant_id AND a.notification_id = n.id AND a.at >= $1 AND a.at < $2))
		OR EXISTS (SELECT 1 FROM (` + unresolvedDeadLettersSQL + `) d WHERE EXISTS (SELECT 1 FROM delivery_attempts a
			WHERE a.tenant_id = d.tenant_id AND a.notification_id = d.notification_id AND a.at >= $1 AND a.at < $2))`
)

// DroppedBefore is the time before which DropPartitions drops every
// partition of the table at cutoff (but those it holds): the start of the
// partition that holds cutoff, or cutoff - LateEnd for a table whose
// partitions can be held. What is left before it after the partitions step is
// only the held partitions' rows, which the prune pass deletes one by one;
// rows after it go with their partition, so none is deleted one by one.
func (t PartitionedTable) DroppedBefore(cutoff time.Time) time.Time {
	if t.holds != "" {
		cutoff = cutoff.Add(-LateEnd)
	}
	return t.Start(cutoff)
}

// span is one partition's length.
func (t PartitionedTable) span() time.Duration {
	if t.Unit == "week" {
		return 7 * retention.Day
	}
	return retention.Day
}

// Start is the start of the partition that holds time at.
func (t PartitionedTable) Start(at time.Time) time.Time {
	d := at.UTC().Truncate(retention.Day)
	if t.Unit == "week" {
		// Monday: Go's Weekday has Sunday = 0.
		d = d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	}
	return d
}

// PartitionName is the name of the partition starting at start.
func (t PartitionedTable) PartitionName(start time.Time) string {
	return t.Table + "_p" + start.UTC().Format("20060102")
}

// PartitionAhead is how far ahead the maintenance workflow keeps partitions:
// a week of runs may fail before an insert finds no partition.
const PartitionAhead = 7 * retention.Day

// Partition is one partition of a table.
type Partition struct {
	Name       string
	Start, End time.Time
	// Attached is false for a table left detached by an interrupted drop.
	Attached bool
}

// Partitions lists the table's partitions, attached or left detached, oldest
// first.
func (s *Store) Partitions(ctx context.Context, t PartitionedTable) ([]Partition, error) {
	rows, err := s.db.Query(ctx, `
		SELECT c.relname, EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid AND i.inhparent = $1::regclass)
		FROM pg_class c
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' AND c.relname LIKE $2
		ORDER BY c.relname`, t.Table, t.Table+`\_p%`)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Partition, error) {
		var p Partition
		err := r.Scan(&p.Name, &p.Attached)
		return p, err
	})
	if err != nil {
		return nil, err
	}
	kept := out[:0]
	for _, p := range out {
		start, err := time.Parse("20060102", strings.TrimPrefix(p.Name, t.Table+"_p"))
		if err != nil {
			continue // not one of ours (a table whose name only starts the same)
		}
		p.Start, p.End = start, start.Add(t.span())
		kept = append(kept, p)
	}
	return kept, nil
}

// DDLLockTimeout bounds how long one partition statement waits for its lock
// before it gives up and is retried (DDLAttempts times): nothing that queues
// behind it (an insert waiting for a lock the statement waits for) waits
// longer.
const (
	DDLLockTimeout = 500 * time.Millisecond
	DDLAttempts    = 20
)

// lockNotAvailable is SQLSTATE lock_not_available (lock_timeout).
const lockNotAvailable = "55P03"

// DDLStats is what partition statements waited.
type DDLStats struct {
	// Statements and Retries count the statements run and the attempts that
	// timed out on their lock.
	Statements, Retries int
	// MaxWait is the longest one attempt took (its lock wait and its work).
	MaxWait time.Duration
}

// ddl runs one statement outside any transaction on a connection of its own
// with lock_timeout DDLLockTimeout, retrying a lock timeout up to DDLAttempts
// times; every attempt's duration goes to observe.
func (s *Store) ddl(ctx context.Context, stats *DDLStats, observe func(time.Duration), sql string) error {
	conn, err := s.ownConn(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	return ddlOn(ctx, conn, stats, observe, DDLLockTimeout, DDLAttempts, sql)
}

// ownConn is a connection of the store's pool for statements that refuse
// a transaction block or hold a session (the partition DDL, compaction).
func (s *Store) ownConn(ctx context.Context) (*pgxpool.Conn, error) {
	pool, ok := dbx.Unwrap(s.db).(*pgxpool.Pool)
	if !ok {
		return nil, errors.New("partition statements need the store's pool (not a transaction)")
	}
	return pool.Acquire(ctx)
}

// ddlOn runs one statement on conn, outside any transaction, with
// lock_timeout lockTimeout, retrying a lock timeout up to attempts times;
// every attempt's duration goes to observe (nil: none).
func ddlOn(ctx context.Context, conn *pgxpool.Conn, stats *DDLStats, observe func(time.Duration), lockTimeout time.Duration, attempts int, sql string) error {
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET lock_timeout = %d", lockTimeout.Milliseconds())); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "RESET lock_timeout") //nolint:errcheck // the connection goes back to the pool either way
	stats.Statements++
	for attempt := 1; ; attempt++ {
		t0 := time.Now()
		// The simple protocol: DETACH … CONCURRENTLY refuses to run in a
		// transaction block, implicit ones included.
		_, err := conn.Conn().PgConn().Exec(ctx, sql).ReadAll()
		d := time.Since(t0)
		stats.MaxWait = max(stats.MaxWait, d)
		if observe != nil {
			observe(d)
		}
		if err == nil || !lockTimedOut(err) || attempt >= attempts {
			return err
		}
		stats.Retries++
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		}
	}
}

// lockTimedOut: the statement gave up waiting for a lock (lock_timeout).
func lockTimedOut(err error) bool { return hasSQLState(err, lockNotAvailable) }

// hasSQLState reports whether err is PostgreSQL's error code.
func hasSQLState(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

// EnsurePartitions creates the table's missing partitions from the one
// holding now to now + ahead: each as a table of its own, then attached
// (ATTACH PARTITION takes SHARE UPDATE EXCLUSIVE on the parent, which inserts
// do not wait for). It returns the names it created.
func (s *Store) EnsurePartitions(ctx context.Context, t PartitionedTable, now time.Time, ahead time.Duration, stats *DDLStats, observe func(time.Duration)) ([]string, error) {
	have, err := s.Partitions(ctx, t)
	if err != nil {
		return nil, err
	}
	attached := map[string]bool{}
	exists := map[string]bool{}
	for _, p := range have {
		exists[p.Name], attached[p.Name] = true, p.Attached
	}
	var created []string
	for start := t.Start(now); !start.After(now.Add(ahead)); start = start.Add(t.span()) {
		name := t.PartitionName(start)
		if attached[name] {
			continue
		}
		if !exists[name] {
			if err := s.ddl(ctx, stats, observe, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`,
				pgx.Identifier{name}.Sanitize(), pgx.Identifier{t.Table}.Sanitize())); err != nil {
				return created, fmt.Errorf("create %s: %w", name, err)
			}
		}
		if err := s.ddl(ctx, stats, observe, fmt.Sprintf(`ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM ('%s') TO ('%s')`,
			pgx.Identifier{t.Table}.Sanitize(), pgx.Identifier{name}.Sanitize(),
			start.Format(time.RFC3339), start.Add(t.span()).Format(time.RFC3339))); err != nil {
			return created, fmt.Errorf("attach %s: %w", name, err)
		}
		created = append(created, name)
	}
	return created, nil
}

// DropPartitions detaches (DETACH PARTITION … CONCURRENTLY: inserts and
// reads of the other partitions go on) and drops every partition of the table
// that ends at or before cutoff (LateEnd before it for the notification
// history), and drops a partition an interrupted run left detached. A
// notification history partition that still holds a notification in flight,
// or one that ended after cutoff (or its deliveries or attempts), or one with
// an open or redriving dead letter created at or after deadLetterCutoff (the
// operator's dead-letter retention: an older one holds nothing), is kept
// whole: its other rows are pruned in batches (PruneNotifications) and the
// partition goes once nothing in it is to be kept. It returns the names it
// dropped and those it kept past cutoff.
func (s *Store) DropPartitions(ctx context.Context, t PartitionedTable, cutoff, deadLetterCutoff time.Time, stats *DDLStats, observe func(time.Duration)) (dropped, held []string, err error) {
	have, err := s.Partitions(ctx, t)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range have {
		if t.holds != "" && p.Attached {
			if p.End.Add(LateEnd).After(cutoff) {
				continue
			}
			var keep bool
			if err := s.db.QueryRow(ctx, t.holds, p.Start, p.End, cutoff, deadLetterCutoff).Scan(&keep); err != nil {
				return dropped, held, fmt.Errorf("rows to keep in %s: %w", p.Name, err)
			}
			if keep {
				held = append(held, p.Name)
				continue
			}
		} else if p.End.After(cutoff) {
			continue
		}
		name := pgx.Identifier{p.Name}.Sanitize()
		if p.Attached {
			err := s.ddl(ctx, stats, observe, fmt.Sprintf(`ALTER TABLE %s DETACH PARTITION %s CONCURRENTLY`, pgx.Identifier{t.Table}.Sanitize(), name))
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && strings.Contains(pgErr.Message, "pending detach") {
				// A detach interrupted half way: finish it.
				err = s.ddl(ctx, stats, observe, fmt.Sprintf(`ALTER TABLE %s DETACH PARTITION %s FINALIZE`, pgx.Identifier{t.Table}.Sanitize(), name))
			}
			if err != nil {
				return dropped, held, fmt.Errorf("detach %s: %w", p.Name, err)
			}
		}
		if err := s.ddl(ctx, stats, observe, `DROP TABLE IF EXISTS `+name); err != nil {
			return dropped, held, fmt.Errorf("drop %s: %w", p.Name, err)
		}
		dropped = append(dropped, p.Name)
	}
	return dropped, held, nil
}

// A partition's indexes are rebuilt packed once the partition is closed
// (CompactPartitions, docs/retention.md#closed-partitions): while a day is
// written, every index whose key starts with tenant_id fills its leaf pages
// to ~50 % (a tenant's keys that rise with time split non-rightmost pages
// in half) or ~70 % (random ids), a third to a half of the index empty for
// the whole retention. Once inserts have moved on to the next partition the
// index only takes the rare update that changes a key, so it is rebuilt with
// fillfactor 100 (REINDEX … CONCURRENTLY: reads, inserts and updates of the
// partition go on; it waits for transactions older than itself and holds
// SHARE UPDATE EXCLUSIVE, which only other DDL and VACUUM conflict with).
const (
	// CompactAfter is how long after its end a partition is compacted:
	// the statuses of its notifications in flight have mostly settled
	// (LateEnd), so their updates no longer change the indexes.
	CompactAfter = LateEnd
	// CompactedComment marks an index rebuilt packed; one without it is
	// rebuilt by the next run (an interrupted rebuild starts over).
	CompactedComment = "herald: compacted"
	// CompactLockTimeout bounds each wait of a rebuild: for its lock, then
	// for the transactions older than it to end (nothing queues behind
	// those waits, so it can wait longer than DDLLockTimeout). A rebuild
	// that times out is left to the next run (Deferred).
	CompactLockTimeout = time.Minute
	// CompactBudget is how long one run starts rebuilds for (the newest
	// closed partitions first): a first run over a month of partitions, or
	// a day at the seed's volume, goes on over the next runs while the
	// run's other steps keep their hourly pace.
	CompactBudget = 30 * time.Minute
	// compactConnCheck is how often the compacting session's backend
	// checks that its client is still there: a worker that dies mid-rebuild
	// has its REINDEX cancelled within it (and the advisory lock released)
	// rather than building on for minutes.
	compactConnCheck = 10 * time.Second
)

// CompactLimits bound one CompactPartitions call; zero fields take the
// defaults (CompactBudget, CompactLockTimeout).
type CompactLimits struct {
	Budget      time.Duration
	LockTimeout time.Duration
}

func (l CompactLimits) orDefaults() CompactLimits {
	if l.Budget <= 0 {
		l.Budget = CompactBudget
	}
	if l.LockTimeout <= 0 {
		l.LockTimeout = CompactLockTimeout
	}
	return l
}

// CompactedIndex is one index CompactPartitions worked on.
type CompactedIndex struct {
	Table, Name   string
	Before, After int64 // bytes
	Took          time.Duration
	// Deferred: its rebuild, the statement before or after it, or the drop
	// of its leftover timed out on a lock (a transaction older than the
	// rebuild ran for over CompactLockTimeout): left to the next run,
	// unmarked, and the run stopped there.
	Deferred bool
}

// CompactResult is what one CompactPartitions call did.
type CompactResult struct {
	Indexes []CompactedIndex
	// Unfinished: the budget ran out with indexes left to rebuild.
	Unfinished bool
}

// ErrCompactionBusy: another session is compacting (a run of another
// process, or the backend of a worker that died, until it notices):
// this run leaves the partitions to the next.
var ErrCompactionBusy = errors.New("another session is compacting partitions")

// compactionLockKey is the session advisory lock the compacting session holds.
const compactionLockKey = "herald/compact-partitions"

// CompactPartitions rebuilds packed the B-tree indexes not compacted yet of
// the partitioned tables' attached partitions that ended at or before
// closedBefore, table by table (store.PartitionedTables' order), newest
// partition first within a table, starting no rebuild after the budget, and
// stopping at a rebuild that timed out on a lock (Deferred, Unfinished).
// One session at a time (ErrCompactionBusy): every statement runs on the
// connection that holds the advisory lock, so a rebuild never outlives the
// lock. It drops what an interrupted rebuild left (an invalid index named
// …_ccnew or …_ccold, no build under way on its table) before rebuilding
// that partition. observe gets each DDL statement's lock wait by table;
// progress is called before each rebuild (the activity heartbeats it).
func (s *Store) CompactPartitions(ctx context.Context, closedBefore time.Time, limits CompactLimits, stats *DDLStats,
	observe func(table string, d time.Duration), progress func(table, index string)) (CompactResult, error) {
	var res CompactResult
	limits = limits.orDefaults()
	conn, err := s.ownConn(ctx)
	if err != nil {
		return res, err
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, compactionLockKey).Scan(&locked); err != nil {
		return res, err
	}
	if !locked {
		return res, ErrCompactionBusy
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		var unlocked bool
		if err := conn.QueryRow(uctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, compactionLockKey).Scan(&unlocked); err != nil || !unlocked {
			// A session that may still hold the lock must not go back to
			// the pool (every run would find it busy): closed, the
			// pool drops it and the lock goes with the backend.
			conn.Conn().Close(uctx) //nolint:errcheck // closing is all that is left
		}
	}()
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET client_connection_check_interval = %d", compactConnCheck.Milliseconds())); err != nil {
		return res, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		conn.Exec(rctx, "RESET client_connection_check_interval") //nolint:errcheck // the connection goes back to the pool either way
	}()
	c := compaction{conn: conn, stats: stats, deadline: time.Now().Add(limits.Budget), lockTimeout: limits.LockTimeout}
	for _, t := range PartitionedTables {
		c.observe = func(d time.Duration) {
			if observe != nil {
				observe(t.Table, d)
			}
		}
		c.progress = func(index string) {
			if progress != nil {
				progress(t.Table, index)
			}
		}
		if err := c.table(ctx, s, t, closedBefore, &res); err != nil || res.Unfinished {
			return res, err
		}
	}
	return res, nil
}

// compaction is one CompactPartitions call's session.
type compaction struct {
	conn        *pgxpool.Conn
	stats       *DDLStats
	deadline    time.Time
	lockTimeout time.Duration
	observe     func(time.Duration)
	progress    func(index string)
}

// table compacts one table's closed partitions, newest first.
func (c *compaction) table(ctx context.Context, s *Store, t PartitionedTable, closedBefore time.Time, res *CompactResult) error {
	have, err := s.Partitions(ctx, t)
	if err != nil {
		return err
	}
	for _, p := range slices.Backward(have) {
		if !p.Attached || p.End.After(closedBefore) {
			continue
		}
		if err := c.partition(ctx, t, p, res); err != nil && !relationGone(err) { // dropped meanwhile: nothing to compact
			return err
		}
		if res.Unfinished {
			return nil
		}
	}
	return nil
}

// partition compacts one partition's indexes.
func (c *compaction) partition(ctx context.Context, t PartitionedTable, p Partition, res *CompactResult) error {
	rows, err := c.conn.Query(ctx, `
		SELECT c.relname, i.indisvalid, COALESCE(obj_description(c.oid, 'pg_class'), '') = $2, pg_relation_size(c.oid),
			EXISTS (SELECT 1 FROM pg_stat_progress_create_index b WHERE b.relid = i.indrelid)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam AND am.amname = 'btree'
		WHERE i.indrelid = $1::regclass ORDER BY i.indisvalid, c.relname`, pgx.Identifier{p.Name}.Sanitize(), CompactedComment)
	if err != nil {
		return err
	}
	type index struct {
		name                     string
		valid, compact, building bool
		size                     int64
	}
	indexes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (index, error) {
		var i index
		err := r.Scan(&i.name, &i.valid, &i.compact, &i.size, &i.building)
		return i, err
	})
	if err != nil {
		return err
	}
	// Invalid indexes come first (ORDER BY indisvalid): an interrupted
	// rebuild's leftover goes before anything is rebuilt.
	for _, i := range indexes {
		name := pgx.Identifier{i.name}.Sanitize()
		switch {
		case !i.valid && interruptedRebuild.MatchString(i.name) && !i.building:
			err := ddlOn(ctx, c.conn, c.stats, c.observe, DDLLockTimeout, DDLAttempts, `DROP INDEX CONCURRENTLY IF EXISTS `+name)
			if lockTimedOut(err) {
				// A transaction holds on: what comes next would wait for it too.
				res.Indexes = append(res.Indexes, CompactedIndex{Table: t.Table, Name: i.name, Deferred: true})
				res.Unfinished = true
				return nil
			}
			if err != nil {
				return fmt.Errorf("drop the interrupted rebuild %s: %w", i.name, err)
			}
			continue
		case !i.valid || i.compact:
			continue
		}
		if time.Now().After(c.deadline) {
			res.Unfinished = true
			return nil
		}
		c.progress(i.name)
		done := CompactedIndex{Table: t.Table, Name: i.name, Before: i.size}
		t0 := time.Now()
		err := ddlOn(ctx, c.conn, c.stats, c.observe, DDLLockTimeout, DDLAttempts, `ALTER INDEX `+name+` SET (fillfactor = 100)`)
		if err == nil {
			// Its time is the rebuild's (Took), not a lock wait: kept out of
			// MaxWait and the lock-wait histogram.
			var rebuild DDLStats
			err = ddlOn(ctx, c.conn, &rebuild, nil, c.lockTimeout, 1, `REINDEX INDEX CONCURRENTLY `+name)
			c.stats.Statements += rebuild.Statements
		}
		if err == nil {
			// Rebuilt: the mark may wait as long as the rebuild did, rather
			// than have the next run rebuild it again.
			err = ddlOn(ctx, c.conn, c.stats, c.observe, c.lockTimeout, 1, `COMMENT ON INDEX `+name+` IS '`+CompactedComment+`'`)
		}
		done.Took = time.Since(t0)
		switch {
		case lockTimedOut(err):
			// A transaction older than the rebuild ran for over a minute: the
			// next rebuilds would wait for it too (each building a whole
			// index first), so the run stops here.
			done.Deferred = true
			res.Indexes = append(res.Indexes, done)
			res.Unfinished = true
			return nil
		case err != nil:
			return fmt.Errorf("compact %s: %w", i.name, err)
		default:
			if err := c.conn.QueryRow(ctx, `SELECT pg_relation_size($1::regclass)`, name).Scan(&done.After); err != nil {
				return err
			}
		}
		res.Indexes = append(res.Indexes, done)
	}
	return nil
}

// relationGone is SQLSTATE undefined_table: a partition or index dropped
// while it was worked on.
func relationGone(err error) bool { return hasSQLState(err, undefinedTable) }

// undefinedTable is SQLSTATE undefined_table.
const undefinedTable = "42P01"

// interruptedRebuild matches the index a REINDEX … CONCURRENTLY stopped half
// way leaves invalid: the new one (before the swap) or the old (after).
var interruptedRebuild = regexp.MustCompile(`_cc(new|old)[0-9]*$`)
