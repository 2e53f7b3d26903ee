#!/usr/bin/env bash
# `make bench`: build and run cmd/herald-bench against the dev services.
#
# Uses the PostgreSQL (127.0.0.1:55432, database herald) and Temporal dev server
# (127.0.0.1:7233) of `make run`: reuses them if they are up (for instance while
# `make run` runs in another terminal), otherwise starts them and stops them
# again afterwards. HERALD_DATABASE_URL / HERALD_TEMPORAL_ADDRESS point it
# elsewhere. Arguments go to herald-bench (`make bench ARGS='-n 2000'`).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HERALD_ROOT"

cleanup() {
	local rc=$?
	trap - EXIT
	trap '' INT TERM HUP PIPE
	set +e
	dev_services_stop_started
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

compgen -G "cmd/herald-bench/*.go" >/dev/null || die "cmd/herald-bench has no Go files: nothing to run"
ensure_go
log "building bin/herald-bench"
go build -o "$BIN_DIR/herald-bench" ./cmd/herald-bench || die "go build ./cmd/herald-bench failed"
dev_services_start
log "bin/herald-bench $* (database $HERALD_DATABASE_URL, Temporal $HERALD_TEMPORAL_ADDRESS)"
rc=0
"$BIN_DIR/herald-bench" "$@" || rc=$?
exit "$rc"
