#!/usr/bin/env bash
# The throwaway services that `make test` uses, for running `go test` by hand:
#   eval "$(scripts/test-services.sh start)"   # PostgreSQL :55433 (herald_test) + Temporal :7243
#   go test ./...
#   scripts/test-services.sh stop
# `start` wipes .herald/test first, registers Herald's search attributes on the
# Temporal server once it answers (go run ./cmd/herald migrate search-attributes,
# so the tree must build) and prints the two export lines on stdout (progress
# goes to stderr).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case "${1:-}" in
start)
	ensure_tools
	test_services_start
	log "test services are up; export these (or eval this script's output):"
	test_services_exports
	;;
stop)
	test_services_stop
	;;
status)
	rc=0
	pg_status "$TEST_PG_DIR" || rc=$?
	temporal_status "$TEST_STATE_DIR" || rc=$?
	exit "$rc"
	;;
env)
	test_services_exports
	;;
*)
	echo "usage: $0 start|stop|status|env" >&2
	exit 2
	;;
esac
