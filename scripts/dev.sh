#!/usr/bin/env bash
# `make run`: the whole Herald stack on this machine, in the foreground.
#
#   PostgreSQL     127.0.0.1:55432, database `herald`, data in .herald/pg (log .herald/pg/log)
#                  skipped if HERALD_DATABASE_URL is set
#   Temporal       dev server on 127.0.0.1:7233, UI http://127.0.0.1:8233, state persisted
#                  in .herald/temporal.db (log .herald/temporal.log); Herald's search
#                  attributes registered once it answers (herald migrate search-attributes)
#                  skipped if HERALD_TEMPORAL_ADDRESS is set (herald dev registers them there)
#   Herald         go build -o bin/herald ./cmd/herald, then `bin/herald dev`
#                  (migrate, demo tenant + API key, API on HERALD_HTTP_ADDR + worker)
#
# Ctrl-C (SIGINT) or SIGTERM stops `herald dev`, then the services this run
# started; services it found already running are reused and left running.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HERALD_ROOT"

HERALD_STOP_TIMEOUT="${HERALD_STOP_TIMEOUT:-40}"

# Set by pg_start / temporal_start as soon as they have started something.
PG_STARTED=0
TEMPORAL_STARTED=0
herald_pid=""

# stop_herald SIG: ask `herald dev` to stop, wait (bounded), then kill it.
stop_herald() {
	local sig="${1:-TERM}" waited=0
	[[ -n "$herald_pid" ]] || return 0
	if kill -0 "$herald_pid" 2>/dev/null; then
		log "stopping herald dev (pid $herald_pid)"
		kill -"$sig" "$herald_pid" 2>/dev/null || true
		while kill -0 "$herald_pid" 2>/dev/null; do
			if ((waited >= HERALD_STOP_TIMEOUT * 10)); then
				warn "herald dev did not stop within ${HERALD_STOP_TIMEOUT}s; killing it"
				kill -KILL "$herald_pid" 2>/dev/null || true
				break
			fi
			sleep 0.1
			waited=$((waited + 1))
		done
	fi
	wait "$herald_pid" 2>/dev/null || true
	herald_pid=""
}

on_signal() {
	local sig="$1" code="$2"
	trap '' INT TERM HUP PIPE
	set +e
	printf '\n' >&2
	log "got SIG$sig, shutting down"
	# herald gets SIGTERM: it was started in its own session, so this is the
	# only signal it sees.
	stop_herald TERM
	exit "$code"
}

on_exit 'stop_herald TERM' dev_services_stop_started
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP
# Our stdout going away (`make run | tee log`, then Ctrl-C kills tee) must
# still shut down in order. A handler, not '' (ignore), so children keep the
# default SIGPIPE behaviour.
trap 'on_signal PIPE 141' PIPE

ensure_go
dev_services_start

export HERALD_HTTP_ADDR="${HERALD_HTTP_ADDR:-127.0.0.1:8080}"

# Herald
if ! compgen -G "cmd/herald/*.go" >/dev/null; then
	die "cmd/herald has no Go files yet, so there is no herald binary to run (the services above worked; they are stopped again if this run started them)"
fi
log "building bin/herald"
go build -o "$BIN_DIR/herald" ./cmd/herald || die "go build ./cmd/herald failed"

log "starting: bin/herald dev  (database $HERALD_DATABASE_URL, Temporal $HERALD_TEMPORAL_ADDRESS, API http://$HERALD_HTTP_ADDR; Ctrl-C stops everything)"
# Own session, so a Ctrl-C in the terminal reaches only this script, which then
# stops herald (one signal) and the services, in that order.
if command -v setsid >/dev/null 2>&1; then
	setsid "$BIN_DIR/herald" dev &
else
	"$BIN_DIR/herald" dev &
fi
herald_pid=$!
rc=0
wait "$herald_pid" || rc=$?
herald_pid=""
if ((rc != 0)); then
	warn "herald dev exited with status $rc"
fi
exit "$rc"
