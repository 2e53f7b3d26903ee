# shellcheck shell=bash
# Shared helpers for Herald's scripts. Source it; don't run it:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Everything here is idempotent: each ensure_* / *_start function reuses what is
# already installed or running and only does the missing part.

if [[ -n "${HERALD_LIB_SOURCED:-}" ]]; then
	return 0
fi
HERALD_LIB_SOURCED=1

HERALD_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="$HERALD_ROOT/bin"
STATE_DIR="$HERALD_ROOT/.herald"

# Pinned tool versions.
TEMPORAL_CLI_MODULE="github.com/temporalio/cli/cmd/temporal"
TEMPORAL_CLI_VERSION="${TEMPORAL_CLI_VERSION:-v1.5.1}"
WORKFLOWCHECK_MODULE="go.temporal.io/sdk/contrib/tools/workflowcheck"
WORKFLOWCHECK_VERSION="${WORKFLOWCHECK_VERSION:-v0.6.0}"
GOLANGCI_LINT_MODULE="github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
GOLANGCI_LINT_VERSION="${GOLANGCI_LINT_VERSION:-v2.15.0}"

# Bounded waits, in seconds.
PG_START_TIMEOUT="${PG_START_TIMEOUT:-60}"
TEMPORAL_START_TIMEOUT="${TEMPORAL_START_TIMEOUT:-120}"
TEMPORAL_STOP_TIMEOUT="${TEMPORAL_STOP_TIMEOUT:-30}"

# Messages go to stderr. A failed write (say, the reader of a pipe is gone)
# never aborts a script, so clean-up still runs.
log() { printf '==> %s\n' "$*" >&2 || true; }
note() { printf '    %s\n' "$*" >&2 || true; }
warn() { printf 'WARNING: %s\n' "$*" >&2 || true; }
die() {
	printf 'ERROR: %s\n' "$*" >&2 || true
	exit 1
}

is_root() { [[ "$(id -u)" == 0 ]]; }

# as_root CMD...: run CMD as root (directly, or through sudo).
as_root() {
	if is_root; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		die "need root to run: $* (no sudo found); install it by hand and retry"
	fi
}

# abspath PATH: absolute form of PATH (which need not exist yet).
abspath() {
	case "$1" in
	/*) printf '%s\n' "$1" ;;
	*) printf '%s\n' "$PWD/$1" ;;
	esac
}

# on_exit CMD...: when the script exits, however it exits, run each CMD (a
# command line, such as the stop of what the script started) and keep the exit
# status; INT, TERM and HUP exit with 130, 143 and 129 (a script may trap them
# again afterwards). Late signals (a second Ctrl-C, a closed pipe) must not cut
# the clean-up short, so they are ignored while it runs.
on_exit() {
	ON_EXIT_CMDS=("$@")
	trap on_exit_run EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
}

on_exit_run() {
	local rc=$? cmd
	trap - EXIT
	trap '' INT TERM HUP PIPE
	set +e
	for cmd in "${ON_EXIT_CMDS[@]}"; do
		eval "$cmd"
	done
	exit "$rc"
}

# tail_log FILE [N]: print the last N lines of a log file to stderr, indented.
tail_log() {
	local file="$1" n="${2:-30}"
	if [[ -f "$file" ]]; then
		printf -- '---- last %s lines of %s ----\n' "$n" "$file" >&2
		tail -n "$n" "$file" | sed 's/^/    /' >&2
		printf -- '----\n' >&2
	fi
}

# ---------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------

ensure_go() {
	command -v go >/dev/null 2>&1 || die "the Go toolchain is not on PATH (Herald needs Go $(go_mod_version)); install it from your OS or https://go.dev/dl and retry"
}

go_mod_version() { sed -n 's/^go \([0-9.]*\).*/\1/p' "$HERALD_ROOT/go.mod" 2>/dev/null | head -n1; }

apt_install() {
	command -v apt-get >/dev/null 2>&1 || die "cannot install $* automatically: no apt-get on this machine; install it by hand and retry"
	log "installing $* with apt-get"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq || die "apt-get update failed"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" </dev/null
}

# go_install_bin WHAT NAME MODULE VERSION [NOTE]: build MODULE@VERSION into
# bin/NAME, the one way every tool Herald builds itself gets there (WHAT names it
# in the log line, NOTE says how long it takes). Returns go install's status: the
# caller decides whether a failure is fatal.
go_install_bin() {
	local what="$1" name="$2" module="$3" version="$4" note="${5:-}"
	ensure_go
	mkdir -p "$BIN_DIR" || die "cannot create $BIN_DIR"
	log "building $what $version into bin/$name${note:+ ($note)}"
	(cd "$HERALD_ROOT" && GOBIN="$BIN_DIR" GOFLAGS='' go install "$module@$version")
}

ensure_temporal_cli() {
	if [[ -x "$BIN_DIR/temporal" ]]; then
		return 0
	fi
	if ! go_install_bin "the Temporal CLI" temporal "$TEMPORAL_CLI_MODULE" "$TEMPORAL_CLI_VERSION" "takes about 8 minutes the first time"; then
		die "could not build the Temporal CLI ($TEMPORAL_CLI_MODULE@$TEMPORAL_CLI_VERSION)"
	fi
}

# ensure_workflowcheck: best effort; a failure is a warning, never fatal.
ensure_workflowcheck() {
	if [[ -x "$BIN_DIR/workflowcheck" ]]; then
		return 0
	fi
	if ! go_install_bin workflowcheck workflowcheck "$WORKFLOWCHECK_MODULE" "$WORKFLOWCHECK_VERSION"; then
		warn "could not build workflowcheck; the determinism check will be skipped"
		return 0
	fi
}

# pg_bin_dir: the directory holding initdb/pg_ctl/psql, newest version first.
# PG_BIN overrides it.
pg_bin_dir() {
	if [[ -n "${PG_BIN:-}" ]]; then
		[[ -x "$PG_BIN/initdb" ]] || die "PG_BIN=$PG_BIN has no initdb"
		printf '%s\n' "$PG_BIN"
		return 0
	fi
	local d best=""
	for d in /usr/lib/postgresql/*/bin; do
		[[ -x "$d/initdb" ]] || continue
		if [[ -z "$best" ]] || [[ "$(basename "$(dirname "$d")")" -gt "$(basename "$(dirname "$best")")" ]] 2>/dev/null; then
			best="$d"
		fi
	done
	if [[ -z "$best" ]] && command -v initdb >/dev/null 2>&1; then
		best="$(dirname "$(command -v initdb)")"
	fi
	[[ -n "$best" ]] || return 1
	printf '%s\n' "$best"
}

ensure_postgres() {
	if pg_bin_dir >/dev/null; then
		return 0
	fi
	if ! apt_install postgresql-15; then
		apt_install postgresql || die "could not install PostgreSQL"
	fi
	pg_bin_dir >/dev/null || die "PostgreSQL is installed but no initdb was found under /usr/lib/postgresql/*/bin"
}

# ensure_golangci_lint: the linters `make test` runs (.golangci.yml: the standard
# set, staticcheck with every check, and a few chosen ones); a failure to build it
# is fatal (CI must not pass with the lint skipped).
ensure_golangci_lint() {
	if [[ -x "$BIN_DIR/golangci-lint" ]] && "$BIN_DIR/golangci-lint" version 2>/dev/null | grep -q "${GOLANGCI_LINT_VERSION#v}"; then
		return 0
	fi
	if ! go_install_bin golangci-lint golangci-lint "$GOLANGCI_LINT_MODULE" "$GOLANGCI_LINT_VERSION" "a few minutes the first time"; then
		die "could not build golangci-lint ($GOLANGCI_LINT_MODULE@$GOLANGCI_LINT_VERSION)"
	fi
}

# chromium_bin: the headless browser the inbox component's browser test drives
# (HERALD_CHROMIUM overrides).
chromium_bin() {
	local c
	for c in "${HERALD_CHROMIUM:-}" chromium chromium-browser; do
		[[ -n "$c" ]] || continue
		if command -v "$c" >/dev/null 2>&1; then
			command -v "$c"
			return 0
		fi
	done
	return 1
}

# ensure_chromium: Debian's chromium for the browser test (`make test` only),
# installed like PostgreSQL when missing. In CI a failure is fatal (the browser
# test must run there); elsewhere it is a warning and the test skips.
ensure_chromium() {
	if chromium_bin >/dev/null; then
		return 0
	fi
	if (apt_install chromium) && chromium_bin >/dev/null; then
		return 0
	fi
	if [[ -n "${CI:-}" ]]; then
		die "could not install chromium, which the inbox browser test needs in CI"
	fi
	warn "chromium is not installed and could not be installed: the inbox browser test will be skipped"
}

# ensure_tmux: Debian's tmux, the terminal the CLI's screen test types into
# (`make test` only; cmd/herald TestCLIUnderTmux), installed like chromium when
# missing: fatal in CI, a warning elsewhere (the test then skips).
ensure_tmux() {
	if command -v tmux >/dev/null 2>&1; then
		return 0
	fi
	if (apt_install tmux) && command -v tmux >/dev/null 2>&1; then
		return 0
	fi
	if [[ -n "${CI:-}" ]]; then
		die "could not install tmux, which the CLI's screen test needs in CI"
	fi
	warn "tmux is not installed and could not be installed: the CLI's screen test will be skipped"
}

ensure_tools() {
	ensure_go
	ensure_temporal_cli
	ensure_postgres
	ensure_workflowcheck
	ensure_golangci_lint
}

# ---------------------------------------------------------------------------
# PostgreSQL: a project-local cluster
# ---------------------------------------------------------------------------

# pg_as_owner CMD...: run a PostgreSQL server binary as the cluster owner
# (`postgres` when we are root, since PostgreSQL refuses to run as root).
pg_as_owner() {
	if is_root; then
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

ensure_pg_os_user() {
	is_root || return 0
	if ! id postgres >/dev/null 2>&1; then
		log "creating the 'postgres' OS user"
		useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres ||
			die "could not create the postgres OS user"
	fi
}

# make_traversable DIR: let the postgres user reach DIR (adds o+x, never o+r, to
# the ancestors that lack it).
make_traversable() {
	is_root || return 0
	local dir="$1" d path=""
	local -a parts
	IFS=/ read -r -a parts <<<"${dir#/}"
	for d in "${parts[@]}"; do
		[[ -n "$d" ]] || continue
		path="$path/$d"
		[[ -d "$path" ]] || break
		if ! runuser -u postgres -- test -x "$path" 2>/dev/null; then
			note "granting search (o+x) permission on $path so the postgres user can reach the data directory"
			chmod o+x "$path" || die "cannot make $path traversable for the postgres user"
		fi
	done
}

# pg_socket_dir DIR PORT: the unix socket directory (inside DIR unless the socket
# path would be too long for the kernel, then /tmp).
pg_socket_dir() {
	local dir="$1" port="$2"
	if ((${#dir} + ${#port} + 10 > 100)); then
		printf '/tmp\n'
	else
		printf '%s\n' "$dir"
	fi
}

# pg_running DIR: is the cluster in DIR running?
pg_running() {
	local dir="$1" bin
	[[ -f "$dir/PG_VERSION" ]] || return 1
	bin="$(pg_bin_dir)" || return 1
	pg_as_owner "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1
}

# pg_port_answers PORT: does any PostgreSQL server answer on 127.0.0.1:PORT?
pg_port_answers() {
	local bin rc=0
	bin="$(pg_bin_dir)" || return 1
	"$bin/pg_isready" -q -h 127.0.0.1 -p "$1" -t 2 >/dev/null 2>&1 || rc=$?
	# 0: accepting, 1: rejecting (starting up): both mean the port is taken.
	[[ $rc == 0 || $rc == 1 ]]
}

# pg_psql PORT DB SQL: run SQL as the postgres superuser, print tuples only.
pg_psql() {
	local bin
	bin="$(pg_bin_dir)"
	"$bin/psql" -X -q -h 127.0.0.1 -p "$1" -U postgres -d "$2" -v ON_ERROR_STOP=1 -tA -c "$3"
}

# pg_start DIR PORT DBNAME: start (or reuse) the cluster in DIR on 127.0.0.1:PORT
# and make sure the `herald` role and database DBNAME exist.
# Sets PG_STARTED=1 if this call started the server, 0 if it reused one.
pg_start() {
	local dir port="$2" db="$3" bin sockdir running_port
	dir="$(abspath "$1")"
	PG_STARTED=0
	ensure_postgres
	bin="$(pg_bin_dir)"
	ensure_pg_os_user
	mkdir -p "$dir"
	make_traversable "$(dirname "$dir")"
	if is_root; then
		chown postgres: "$dir"
	fi
	chmod 700 "$dir"

	if [[ ! -f "$dir/PG_VERSION" ]]; then
		if [[ -n "$(ls -A "$dir")" ]]; then
			die "$dir is not empty and holds no PostgreSQL cluster; move it away (or delete it) and retry"
		fi
		log "initializing a PostgreSQL cluster in $dir"
		local initlog
		initlog="$(mktemp)"
		chmod 644 "$initlog"
		if ! pg_as_owner "$bin/initdb" -D "$dir" --auth=trust -U postgres --encoding=UTF8 --locale=C >"$initlog" 2>&1; then
			tail_log "$initlog" 40
			rm -f "$initlog"
			die "initdb failed for $dir"
		fi
		rm -f "$initlog"
	fi

	if pg_running "$dir"; then
		running_port="$(sed -n 4p "$dir/postmaster.pid" 2>/dev/null || true)"
		if [[ -n "$running_port" && "$running_port" != "$port" ]]; then
			die "the PostgreSQL cluster in $dir is already running on port $running_port, not $port; stop it with: scripts/pg.sh stop $dir"
		fi
		log "reusing the PostgreSQL cluster already running in $dir (port $port)"
	else
		if pg_port_answers "$port"; then
			die "port $port is already used by another PostgreSQL server (not the cluster in $dir); stop it or pick another port"
		fi
		sockdir="$(pg_socket_dir "$dir" "$port")"
		log "starting PostgreSQL on 127.0.0.1:$port (data: $dir, log: $dir/log)"
		if ! pg_as_owner "$bin/pg_ctl" -D "$dir" \
			-o "-p $port -k $sockdir -c listen_addresses=127.0.0.1" \
			-l "$dir/log" -w -t "$PG_START_TIMEOUT" start >/dev/null; then
			tail_log "$dir/log" 40
			pg_as_owner "$bin/pg_ctl" -D "$dir" -m immediate -w -t 10 stop >/dev/null 2>&1 || true
			die "PostgreSQL did not start within ${PG_START_TIMEOUT}s on port $port (see $dir/log)"
		fi
		PG_STARTED=1
	fi

	if [[ "$(pg_psql "$port" postgres "SELECT 1 FROM pg_roles WHERE rolname = 'herald'")" != 1 ]]; then
		pg_psql "$port" postgres "CREATE ROLE herald LOGIN SUPERUSER" >/dev/null ||
			die "could not create role herald on port $port"
	fi
	if [[ "$(pg_psql "$port" postgres "SELECT 1 FROM pg_database WHERE datname = '$db'")" != 1 ]]; then
		note "creating database $db"
		pg_psql "$port" postgres "CREATE DATABASE \"$db\" OWNER herald" >/dev/null ||
			die "could not create database $db on port $port"
	fi
}

# pg_stop DIR: stop the cluster in DIR if it runs.
pg_stop() {
	local dir bin
	dir="$(abspath "$1")"
	if ! pg_running "$dir"; then
		return 0
	fi
	bin="$(pg_bin_dir)"
	log "stopping PostgreSQL ($dir)"
	if ! pg_as_owner "$bin/pg_ctl" -D "$dir" -m fast -w -t "$PG_START_TIMEOUT" stop >/dev/null; then
		warn "PostgreSQL in $dir did not stop within ${PG_START_TIMEOUT}s; trying immediate shutdown"
		pg_as_owner "$bin/pg_ctl" -D "$dir" -m immediate -w -t 30 stop >/dev/null ||
			die "could not stop PostgreSQL in $dir"
	fi
}

pg_status() {
	local dir
	dir="$(abspath "$1")"
	if pg_running "$dir"; then
		echo "PostgreSQL in $dir: running on port $(sed -n 4p "$dir/postmaster.pid")"
	else
		echo "PostgreSQL in $dir: stopped"
		return 3
	fi
}

# ---------------------------------------------------------------------------
# Temporal dev server
# ---------------------------------------------------------------------------

temporal_healthy() {
	"$BIN_DIR/temporal" operator cluster health --address "$1" --command-timeout 3s 2>/dev/null | grep -q SERVING
}

# temporal_ready ADDR: healthy, and the default namespace answers.
temporal_ready() {
	temporal_healthy "$1" &&
		"$BIN_DIR/temporal" operator namespace describe --address "$1" -n default --command-timeout 3s >/dev/null 2>&1
}

# temporal_pid DIR: pid of the dev server started into DIR, if it still runs.
temporal_pid() {
	local pidfile="$1/temporal.pid" pid
	[[ -f "$pidfile" ]] || return 1
	pid="$(cat "$pidfile" 2>/dev/null || true)"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	# Guard against a recycled pid.
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'temporal.*server.*start-dev' || return 1
	printf '%s\n' "$pid"
}

# temporal_wait ADDR PID LOG: wait (bounded) until the server answers; on
# failure print why and return 1.
temporal_wait() {
	local addr="$1" pid="$2" logfile="$3" waited=0
	until temporal_ready "$addr"; do
		if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
			tail_log "$logfile" 40
			printf 'ERROR: %s\n' "the Temporal dev server on $addr exited during start-up (see $logfile)" >&2
			return 1
		fi
		if ((waited >= TEMPORAL_START_TIMEOUT)); then
			tail_log "$logfile" 40
			printf 'ERROR: %s\n' "the Temporal dev server on $addr did not answer within ${TEMPORAL_START_TIMEOUT}s (see $logfile)" >&2
			return 1
		fi
		sleep 1
		waited=$((waited + 1))
	done
}

# temporal_register_search_attributes ADDR: register Herald's search attributes
# on the `default` namespace of the server at ADDR, skipping those already
# there, with `herald migrate search-attributes` (go run: the list is
# workflows.SearchAttributes, nowhere else; and no bin/herald gets replaced).
# Its report goes to stderr, like every message here.
temporal_register_search_attributes() {
	local addr="$1"
	ensure_go
	log "registering Herald's search attributes on $addr (go run ./cmd/herald migrate search-attributes)"
	(cd "$HERALD_ROOT" && HERALD_TEMPORAL_ADDRESS="$addr" HERALD_TEMPORAL_NAMESPACE=default \
		go run ./cmd/herald migrate search-attributes) >&2
}

# temporal_start DIR PORT [start-dev flags...]: start (or reuse) a Temporal dev
# server on 127.0.0.1:PORT and, once it answers, register Herald's search
# attributes on it (temporal_register_search_attributes); pidfile and log are
# DIR/temporal.pid and DIR/temporal.log.
# Sets TEMPORAL_STARTED=1 if this call started the server, 0 if it reused one.
temporal_start() {
	local dir port="$2" addr pid logfile
	dir="$(abspath "$1")"
	shift 2
	addr="127.0.0.1:$port"
	logfile="$dir/temporal.log"
	TEMPORAL_STARTED=0
	ensure_temporal_cli
	mkdir -p "$dir"

	if pid="$(temporal_pid "$dir")"; then
		log "reusing the Temporal dev server already running on $addr (pid $pid)"
		temporal_wait "$addr" "$pid" "$logfile" || exit 1
		temporal_register_search_attributes "$addr" ||
			die "could not register Herald's search attributes on $addr"
		return 0
	fi
	rm -f "$dir/temporal.pid"
	if temporal_healthy "$addr"; then
		log "a Temporal server not started by these scripts already answers on $addr: reusing it (it will not be stopped)"
		temporal_register_search_attributes "$addr" ||
			die "could not register Herald's search attributes on $addr"
		return 0
	fi

	local -a args=(server start-dev --ip 127.0.0.1 --port "$port" --log-level warn "$@")

	log "starting the Temporal dev server on $addr (log: $logfile)"
	printf '\n==== %s: temporal %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${args[*]}" >>"$logfile"
	if command -v setsid >/dev/null 2>&1; then
		# Own session: a Ctrl-C in the terminal reaches the scripts, which stop
		# the server in order, instead of killing it mid-way.
		setsid "$BIN_DIR/temporal" "${args[@]}" >>"$logfile" 2>&1 </dev/null &
	else
		nohup "$BIN_DIR/temporal" "${args[@]}" >>"$logfile" 2>&1 </dev/null &
	fi
	pid=$!
	echo "$pid" >"$dir/temporal.pid"
	if ! temporal_wait "$addr" "$pid" "$logfile"; then
		temporal_stop "$dir"
		exit 1
	fi
	if ! temporal_register_search_attributes "$addr"; then
		printf 'ERROR: %s\n' "could not register Herald's search attributes on $addr; stopping the Temporal dev server" >&2
		temporal_stop "$dir"
		exit 1
	fi
	TEMPORAL_STARTED=1
}

# temporal_stop DIR: stop the dev server started into DIR, if any.
temporal_stop() {
	local dir pid waited=0
	dir="$(abspath "$1")"
	if ! pid="$(temporal_pid "$dir")"; then
		rm -f "$dir/temporal.pid"
		return 0
	fi
	log "stopping the Temporal dev server (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null; do
		if ((waited >= TEMPORAL_STOP_TIMEOUT * 10)); then
			warn "the Temporal dev server (pid $pid) did not stop within ${TEMPORAL_STOP_TIMEOUT}s; killing it"
			kill -KILL "$pid" 2>/dev/null || true
			sleep 0.5
			break
		fi
		sleep 0.1
		waited=$((waited + 1))
	done
	rm -f "$dir/temporal.pid"
}

temporal_status() {
	local dir pid
	dir="$(abspath "$1")"
	if pid="$(temporal_pid "$dir")"; then
		echo "Temporal dev server ($dir): running, pid $pid"
	else
		echo "Temporal dev server ($dir): stopped"
		return 3
	fi
}

# ---------------------------------------------------------------------------
# The test services (make test, scripts/test-services.sh)
# ---------------------------------------------------------------------------

TEST_STATE_DIR="$STATE_DIR/test"
TEST_PG_DIR="$TEST_STATE_DIR/pg"
TEST_PG_PORT="${HERALD_TEST_PG_PORT:-55433}"
TEST_PG_DB="herald_test"
TEST_TEMPORAL_PORT="${HERALD_TEST_TEMPORAL_PORT:-7243}"
TEST_TEMPORAL_HTTP_PORT="${HERALD_TEST_TEMPORAL_HTTP_PORT:-7244}"
TEST_TEMPORAL_METRICS_PORT="${HERALD_TEST_TEMPORAL_METRICS_PORT:-7245}"
TEST_DATABASE_URL="postgres://herald@127.0.0.1:$TEST_PG_PORT/$TEST_PG_DB?sslmode=disable"
TEST_TEMPORAL_ADDRESS="127.0.0.1:$TEST_TEMPORAL_PORT"

test_services_stop() {
	temporal_stop "$TEST_STATE_DIR"
	pg_stop "$TEST_PG_DIR"
}

# test_services_start: throwaway services, wiped first.
test_services_start() {
	test_services_stop
	rm -rf "$TEST_PG_DIR"
	mkdir -p "$TEST_STATE_DIR"
	pg_start "$TEST_PG_DIR" "$TEST_PG_PORT" "$TEST_PG_DB"
	# In memory (no --db-filename), headless, fixed side ports so it never
	# collides with the `make run` server (7233/8233).
	temporal_start "$TEST_STATE_DIR" "$TEST_TEMPORAL_PORT" --headless \
		--http-port "$TEST_TEMPORAL_HTTP_PORT" --metrics-port "$TEST_TEMPORAL_METRICS_PORT"
}

test_services_exports() {
	printf "export HERALD_TEST_DATABASE_URL='%s'\n" "$TEST_DATABASE_URL"
	printf "export HERALD_TEST_TEMPORAL_ADDRESS='%s'\n" "$TEST_TEMPORAL_ADDRESS"
}

# ---------------------------------------------------------------------------
# The dev services (make run, make bench)
# ---------------------------------------------------------------------------

DEV_PG_DIR="$STATE_DIR/pg"
DEV_PG_PORT="${HERALD_DEV_PG_PORT:-55432}"
DEV_PG_DB="herald"
DEV_TEMPORAL_PORT="${HERALD_DEV_TEMPORAL_PORT:-7233}"
DEV_TEMPORAL_UI_PORT="${HERALD_DEV_TEMPORAL_UI_PORT:-8233}"

# dev_services_start: PostgreSQL (.herald/pg, 127.0.0.1:55432, database herald)
# unless HERALD_DATABASE_URL is set, and the Temporal dev server (127.0.0.1:7233,
# UI 8233, state in .herald/temporal.db) unless HERALD_TEMPORAL_ADDRESS is set;
# each reused if already running. Exports HERALD_DATABASE_URL and
# HERALD_TEMPORAL_ADDRESS. PG_STARTED / TEMPORAL_STARTED tell what it started.
dev_services_start() {
	PG_STARTED=0
	TEMPORAL_STARTED=0
	mkdir -p "$STATE_DIR"
	if [[ -n "${HERALD_DATABASE_URL:-}" ]]; then
		log "HERALD_DATABASE_URL is set: using it, not starting PostgreSQL"
	else
		pg_start "$DEV_PG_DIR" "$DEV_PG_PORT" "$DEV_PG_DB"
		export HERALD_DATABASE_URL="postgres://herald@127.0.0.1:$DEV_PG_PORT/$DEV_PG_DB?sslmode=disable"
	fi
	if [[ -n "${HERALD_TEMPORAL_ADDRESS:-}" ]]; then
		log "HERALD_TEMPORAL_ADDRESS is set: using $HERALD_TEMPORAL_ADDRESS, not starting Temporal"
	else
		temporal_start "$STATE_DIR" "$DEV_TEMPORAL_PORT" \
			--ui-port "$DEV_TEMPORAL_UI_PORT" --db-filename "$STATE_DIR/temporal.db"
		export HERALD_TEMPORAL_ADDRESS="127.0.0.1:$DEV_TEMPORAL_PORT"
		note "Temporal UI: http://127.0.0.1:$DEV_TEMPORAL_UI_PORT"
	fi
}

# dev_services_stop_started: stop what dev_services_start started (not what it reused).
dev_services_stop_started() {
	if ((${TEMPORAL_STARTED:-0})); then
		temporal_stop "$STATE_DIR" || true
	fi
	if ((${PG_STARTED:-0})); then
		pg_stop "$DEV_PG_DIR" || true
	fi
	if ((${PG_STARTED:-0} || ${TEMPORAL_STARTED:-0})); then
		log "stopped the services this run started"
	fi
	PG_STARTED=0
	TEMPORAL_STARTED=0
}
