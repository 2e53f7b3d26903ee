# Herald — `make help` lists the targets.
#
#   make run                 PostgreSQL :55432 + Temporal dev server :7233 (UI :8233) + bin/herald dev
#   make test                the whole suite against throwaway services (PostgreSQL :55433, Temporal :7243)
#   make test ARGS='-run TestX ./api/...'   extra `go test` arguments (packages default to ./...)
#   make fuzz FUZZTIME=10m   fuzz the accept path, campaigns and list uploads for longer (default 2m each)

SHELL := /bin/bash
.DEFAULT_GOAL := help
ARGS ?=
FUZZTIME ?= 2m

.PHONY: help run test lint fuzz build tools services-up services-down bench bench-lanes clean

help: ## List the targets
	@echo "Herald make targets:"
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

run: ## Run the dev stack in the foreground: PostgreSQL, Temporal (UI http://127.0.0.1:8233), herald dev; Ctrl-C stops it
	@bash scripts/dev.sh

test: ## Vet, gofmt, workflowcheck and go test against throwaway services (ARGS='...' goes to go test)
	@bash scripts/test.sh $(ARGS)

lint: ## Run golangci-lint with .golangci.yml (the same linters make test runs)
	@bash -c 'source scripts/lib.sh && ensure_golangci_lint' && bin/golangci-lint run ./...

FUZZERS ?= FuzzAccept FuzzCampaign FuzzListUpload

fuzz: ## Fuzz POST /v1/notifications, /v1/campaigns and /v1/lists (FUZZERS: no 5xx, every accepted one final) for FUZZTIME (2m) each against throwaway services; new failures land in api/testdata/fuzz/<Fuzzer>
	@eval "$$(bash scripts/test-services.sh start)" && \
	rc=0; for f in $(FUZZERS); do \
		go test -count=1 -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) ./api/ || { rc=$$?; break; }; \
	done; \
	bash scripts/test-services.sh stop; exit $$rc

build: ## Build bin/herald
	go build -o bin/herald ./cmd/herald

tools: ## Install the project-local tools (bin/temporal, bin/workflowcheck, bin/golangci-lint, PostgreSQL)
	@bash scripts/ensure-tools.sh

services-up: ## Start the test services for running go test by hand (prints the exports)
	@bash scripts/test-services.sh start

services-down: ## Stop the test services
	@bash scripts/test-services.sh stop

bench: ## Run cmd/herald-bench against the dev PostgreSQL + Temporal (reused if `make run` is up; ARGS='...' goes to herald-bench)
	@bash scripts/bench.sh $(ARGS)

bench-lanes: ## Priority-lane benchmark: critical latency while 10,000 bulk notifications drain (throwaway services)
	@eval "$$(bash scripts/test-services.sh start)" && \
	go test -count=1 -run '^$$' -bench BenchmarkCriticalDuringBulkBacklog -benchtime 1x -timeout 30m ./activities/; \
	rc=$$?; bash scripts/test-services.sh stop; exit $$rc

clean: ## Stop the test services, remove .herald/test and the built binaries (keeps bin/temporal and make-run data)
	@bash scripts/test-services.sh stop
	rm -rf .herald/test bin/herald bin/herald-bench
