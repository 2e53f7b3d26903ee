#!/usr/bin/env bash
# A project-local PostgreSQL cluster.
#   scripts/pg.sh start  DIR PORT DBNAME   initdb DIR if empty, start on 127.0.0.1:PORT (or reuse),
#                                          ensure role `herald` and database DBNAME
#   scripts/pg.sh stop   DIR
#   scripts/pg.sh status DIR
# The server log is DIR/log; the unix socket lives in DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
	echo "usage: $0 start DIR PORT DBNAME | stop DIR | status DIR" >&2
	exit 2
}

cmd="${1:-}"
case "$cmd" in
start)
	[[ $# == 4 ]] || usage
	pg_start "$2" "$3" "$4"
	echo "postgres://herald@127.0.0.1:$3/$4?sslmode=disable"
	;;
stop)
	[[ $# -ge 2 ]] || usage
	pg_stop "$2"
	;;
status)
	[[ $# -ge 2 ]] || usage
	pg_status "$2"
	;;
*) usage ;;
esac
