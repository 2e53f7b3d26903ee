#!/usr/bin/env bash
# A Temporal dev server (bin/temporal server start-dev) in the background, with
# Herald's search attributes (workflows.SearchAttributes, all Keyword) registered
# on its `default` namespace by `herald migrate search-attributes` once it answers.
#   scripts/temporal.sh start  DIR PORT [extra start-dev flags...]
#   scripts/temporal.sh stop   DIR
#   scripts/temporal.sh status DIR
# DIR holds temporal.pid and temporal.log. `start` reuses a server it started
# before, and waits (bounded) until the server answers on 127.0.0.1:PORT.
# Example (what `make run` uses):
#   scripts/temporal.sh start .herald 7233 --ui-port 8233 --db-filename .herald/temporal.db
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
	echo "usage: $0 start DIR PORT [start-dev flags...] | stop DIR | status DIR" >&2
	exit 2
}

cmd="${1:-}"
case "$cmd" in
start)
	[[ $# -ge 3 ]] || usage
	shift
	temporal_start "$@"
	echo "127.0.0.1:$2"
	;;
stop)
	[[ $# -ge 2 ]] || usage
	temporal_stop "$2"
	;;
status)
	[[ $# -ge 2 ]] || usage
	temporal_status "$2"
	;;
*) usage ;;
esac
