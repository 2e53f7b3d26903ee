#!/usr/bin/env bash
# `make bench`: build and run cmd/herald-bench against the dev services.
#
# Uses the PostgreSQL (127.0.0.1:55432, database herald) and Temporal dev server
# (127.0.0.1:7233) of `make run`: reuses them if they are up (for instance while
# `make run` runs in another terminal), otherwise starts them and stops them
# again afterwards. HERALD_DATABASE_URL / HERALD_TEMPORAL_ADDRESS point it
# elsewhere. Arguments go to herald-bench (`make bench ARGS='-n 2000'`).
#
# HERALD_BENCH_PIN_TEMPORAL=1 gives the Temporal server a CPU of its own, as in a
# deployment where Temporal runs on its own hosts: the server (found by its port)
# is pinned to the last CPU, and PostgreSQL (every postgres process of this user)
# and herald-bench (the API, the worker and the load) to the others (taskset from
# util-linux; at least 2 CPUs). See docs/bench.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HERALD_ROOT"

on_exit dev_services_stop_started

compgen -G "cmd/herald-bench/*.go" >/dev/null || die "cmd/herald-bench has no Go files: nothing to run"
ensure_go
log "building bin/herald-bench"
go build -o "$BIN_DIR/herald-bench" ./cmd/herald-bench || die "go build ./cmd/herald-bench failed"
dev_services_start
log "bin/herald-bench $* (database $HERALD_DATABASE_URL, Temporal $HERALD_TEMPORAL_ADDRESS)"
runner=()
if [[ "${HERALD_BENCH_PIN_TEMPORAL:-0}" == 1 ]]; then
	command -v taskset >/dev/null || die "HERALD_BENCH_PIN_TEMPORAL=1 needs taskset (util-linux)"
	cpus="$(nproc)"
	((cpus >= 2)) || die "HERALD_BENCH_PIN_TEMPORAL=1 needs at least 2 CPUs (this machine has $cpus)"
	last=$((cpus - 1)) rest="0-$((cpus - 2))"
	port="${HERALD_TEMPORAL_ADDRESS##*:}"
	tpids="$(pgrep -f "temporal.*start-dev.*--port $port( |\$)" || true)"
	[[ -n "$tpids" ]] || die "no Temporal dev server on port $port to pin"
	for pid in $tpids; do taskset -a -p -c "$last" "$pid" >/dev/null; done
	for pid in $(pgrep -u "$(id -u)" -x postgres || true); do taskset -a -p -c "$rest" "$pid" >/dev/null 2>&1 || true; done
	log "pinned the Temporal server (pid $tpids) to CPU $last; PostgreSQL and herald-bench to CPUs $rest"
	runner=(taskset -c "$rest")
fi
rc=0
"${runner[@]}" "$BIN_DIR/herald-bench" "$@" || rc=$?
exit "$rc"
