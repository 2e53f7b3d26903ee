#!/usr/bin/env bash
# `make test`: everything CI checks, from a fresh machine.
#
#   1. tools: bin/temporal, PostgreSQL, bin/workflowcheck, bin/golangci-lint (scripts/ensure-tools.sh),
#      and Debian's chromium for the inbox component's browser test and tmux for the CLI's
#      screen test (installed when missing)
#   2. throwaway services, wiped first: PostgreSQL 127.0.0.1:55433 (database herald_test,
#      data .herald/test/pg) and an in-memory headless Temporal dev server 127.0.0.1:7243
#      (log .herald/test/temporal.log); always stopped on exit
#   3. go vet ./...; go mod tidy -diff; golangci-lint run ./... (.golangci.yml); gofmt -l (fails if any file is
#      listed); workflowcheck ./workflows/...
#   4. go test -count=1 -timeout 20m ./...   (arguments to this script go to go test;
#      packages default to ./...)
#
# Exit status: go test's if it failed, else 1 if a check failed, else 0.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HERALD_ROOT"

GO_TEST_TIMEOUT="${GO_TEST_TIMEOUT:-20m}"

on_exit test_services_stop

started_at=$SECONDS
ensure_tools
ensure_chromium
ensure_tmux
if chromium_bin >/dev/null; then
	HERALD_CHROMIUM="$(chromium_bin)"
	export HERALD_CHROMIUM
fi
test_services_start
export HERALD_TEST_DATABASE_URL="$TEST_DATABASE_URL"
export HERALD_TEST_TEMPORAL_ADDRESS="$TEST_TEMPORAL_ADDRESS"
log "test services up: HERALD_TEST_DATABASE_URL=$HERALD_TEST_DATABASE_URL HERALD_TEST_TEMPORAL_ADDRESS=$HERALD_TEST_TEMPORAL_ADDRESS"

failed=()

log "go vet ./..."
if ! go vet ./...; then
	failed+=("go vet")
fi

log "go mod tidy -diff"
if ! go mod tidy -diff; then
	note "(go.mod/go.sum are not tidy: run go mod tidy and commit the result)"
	failed+=("go mod tidy")
fi

log "golangci-lint run ./... (.golangci.yml)"
if ! "$BIN_DIR/golangci-lint" run ./...; then
	failed+=("golangci-lint")
fi

log "gofmt -l"
unformatted="$(find . -name '*.go' -type f \
	-not -path './.git/*' -not -path './bin/*' -not -path './.herald/*' \
	-not -path './vendor/*' -not -path '*/testdata/*' \
	-print0 | xargs -0 -r gofmt -l)" || {
	failed+=("gofmt")
	unformatted="(gofmt itself failed)"
}
if [[ -n "$unformatted" ]]; then
	printf 'these files need gofmt (run: gofmt -w FILE):\n%s\n' "$unformatted" | sed 's/^/    /' >&2
	[[ " ${failed[*]-} " == *" gofmt "* ]] || failed+=("gofmt")
fi

if [[ -x "$BIN_DIR/workflowcheck" ]] && [[ -d workflows ]]; then
	log "workflowcheck ./workflows/..."
	if ! "$BIN_DIR/workflowcheck" ./workflows/...; then
		note "(silence a false positive, such as a map range whose result does not depend on order, with a //workflowcheck:ignore comment on its own line just above the statement)"
		failed+=("workflowcheck")
	fi
else
	warn "bin/workflowcheck is not installed: skipping the workflow determinism check"
fi

# go test arguments: everything given to this script; ./... unless a package
# pattern is among them.
test_args=("$@")
has_pkg=0
for a in "${test_args[@]+"${test_args[@]}"}"; do
	case "$a" in
	./* | ../* | . | */... | github.com/*) has_pkg=1 ;;
	esac
done
if ((!has_pkg)); then
	test_args+=(./...)
fi

log "go test -count=1 -timeout $GO_TEST_TIMEOUT ${test_args[*]}"
test_rc=0
go test -count=1 -timeout "$GO_TEST_TIMEOUT" "${test_args[@]}" || test_rc=$?
if ((test_rc != 0)); then
	failed+=("go test (exit $test_rc)")
fi

test_services_stop
elapsed=$((SECONDS - started_at))
if ((${#failed[@]} > 0)); then
	summary="$(printf '%s, ' "${failed[@]}")"
	printf '\nFAILED after %ss: %s\n' "$elapsed" "${summary%, }" >&2
	if ((test_rc != 0)); then
		exit "$test_rc"
	fi
	exit 1
fi
printf '\nmake test: vet, go mod tidy, golangci-lint, gofmt, workflowcheck and go test all passed (%ss)\n' "$elapsed" >&2
