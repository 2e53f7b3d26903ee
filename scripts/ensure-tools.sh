#!/usr/bin/env bash
# Idempotently install what `make run` / `make test` need:
#   bin/temporal       Temporal CLI (go install, ~8 min the first time)
#   PostgreSQL         server binaries (apt-get if /usr/lib/postgresql/*/bin/initdb is absent)
#   bin/workflowcheck  Temporal determinism checker (best effort)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_tools
log "tools ready: bin/temporal, PostgreSQL ($(pg_bin_dir))$([[ -x "$BIN_DIR/workflowcheck" ]] && echo ', bin/workflowcheck')"
