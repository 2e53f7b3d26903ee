#!/usr/bin/env bash
# How long an index build on a table of ROWS rows (default 1,000,000, shaped
# like the inbox) holds up a concurrent insert, with CREATE INDEX (what a
# migration file of several statements runs: one implicit transaction) and
# with CREATE INDEX CONCURRENTLY (schema/migrations/README.md#indexes-on-big-tables).
# Usage: scripts/index-lock-bench.sh postgres://user@127.0.0.1:PORT/postgres [ROWS]
# It creates and drops a database of its own, herald_index_lock_bench.
set -euo pipefail
admin=${1:?a PostgreSQL URL to the postgres database}
rows=${2:-1000000}
db=${admin%/*}/herald_index_lock_bench
psql -qX "$admin" -c 'DROP DATABASE IF EXISTS herald_index_lock_bench' -c 'CREATE DATABASE herald_index_lock_bench'
trap 'psql -qX "$admin" -c "DROP DATABASE IF EXISTS herald_index_lock_bench WITH (FORCE)"' EXIT
psql -qX "$db" <<SQL
CREATE TABLE inbox (tenant_id text NOT NULL, user_id text NOT NULL, notification_id text NOT NULL, title text NOT NULL,
    body text NOT NULL, category text NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), due_seq bigint NOT NULL,
    PRIMARY KEY (tenant_id, user_id, notification_id));
INSERT INTO inbox SELECT 't_bench', 'u' || (i % 10000), 'n_' || md5(i::text), 'Your order shipped', 'Order o-123 is on its way.',
    'general', now(), i FROM generate_series(1, $rows) i;
VACUUM ANALYZE inbox;
SQL
ms() { date +%s%3N; }
insert() {
  psql -qX "$db" -c "INSERT INTO inbox VALUES ('t_bench', 'u1', 'n_during', 't', 'b', 'general', now(), 0)" \
                 -c "DELETE FROM inbox WHERE notification_id = 'n_during'"
}
i0=$(ms); insert; i1=$(ms)
echo "no index build: the insert (with psql's start) took $((i1 - i0)) ms"
for how in "" "CONCURRENTLY"; do
  psql -qX "$db" -c "DROP INDEX IF EXISTS inbox_due_idx"
  t0=$(ms)
  psql -qX "$db" -c "CREATE INDEX $how inbox_due_idx ON inbox (tenant_id, user_id, due_seq DESC, notification_id DESC)" &
  build=$!
  sleep 0.2
  i0=$(ms)
  insert
  i1=$(ms)
  wait $build
  t1=$(ms)
  echo "CREATE INDEX ${how:-(plain)} on $rows rows: build $((t1 - t0)) ms; an insert started 200 ms in took $((i1 - i0)) ms"
done
