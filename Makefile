# hookyard — `make run` starts the whole pipeline, `make test` runs every test.
GO ?= go
DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/hookyard?sslmode=disable
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/hookyard_test?sslmode=disable
export DATABASE_URL TEST_DATABASE_URL

.PHONY: run test test-short bench fuzz build vet lint demo chaos

run: ## whole pipeline in one process: receiver :8080, ops API :8081, embedded Kafka :9092
	$(GO) run . dev

build:
	$(GO) build -o bin/hookyard .

test: ## all tests, with the race detector, against local Postgres and in-process Kafka
	bash scripts/check-large-files.sh
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 15m ./...

test-short:
	$(GO) test -count=1 -short ./...

bench: ## receiver vs pgbench, processor throughput; prints tables
	$(GO) run ./cmd/hookyard-bench

fuzz: ## every fuzz target, FUZZTIME each (default 30s)
	bash scripts/fuzz.sh

demo: ## with `make run` in another shell: a cancellation delivered before a stale "active" event
	$(GO) run . demo

SEED ?= 1
chaos: ## every service a process, faults from SEED, 10,000 subscriptions and 100,000 events at 100/s (about 20 min); prints the invariants table
	$(GO) build -o bin/hookyard . && bin/hookyard chaos -seed $(SEED) -subscriptions 10000 -events 100000
