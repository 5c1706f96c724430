# hookyard — `make run` starts the whole pipeline, `make test` runs every test.
GO ?= go
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/hookyard_test?sslmode=disable
export TEST_DATABASE_URL
# No DATABASE_URL default here: `hookyard dev` starts a PostgreSQL of its own
# only when DATABASE_URL is unset (and nothing answers on 127.0.0.1:5432).

.PHONY: run test test-short test-kafka kafka kafka-stop bench fuzz build vet lint help demo changes-demo chaos

run: ## whole pipeline in one process: receiver :8080, ops API :8081, embedded Kafka :9092, Postgres from DATABASE_URL, else local :5432, else embedded
	$(GO) run . dev

build: ## the binary, as bin/hookyard
	$(GO) build -o bin/hookyard .

test: ## all tests, with the race detector, against local Postgres and in-process Kafka
	bash scripts/check-large-files.sh
	bash scripts/test-db.sh
	bash scripts/chromium.sh || [ "$${CI:-}" != true ]  # the console's browser tests; outside CI they skip without it
	$(GO) vet ./...
	KAFKA_BROKERS= $(GO) test -race -count=1 -timeout 15m ./...

kafka: ## three-node Apache Kafka (KRaft) on 127.0.0.1:19092-19094, fetched with Maven; prints its version when ready
	bash scripts/kafka.sh start

kafka-stop: ## stops `make kafka` and deletes its data
	bash scripts/kafka.sh stop

test-kafka: ## the Kafka-facing tests and the broker-failure runs against `make kafka` (started and stopped if not up)
	GO=$(GO) bash scripts/test-kafka.sh

test-short: ## every test with -short (no race detector): a quick check while editing
	$(GO) test -count=1 -short ./...

bench: ## receiver vs pgbench, processor, relay, whole pipeline; prints tables, writes bench-results/*.json
	$(GO) run ./cmd/hookyard-bench

fuzz: ## every fuzz target, FUZZTIME each (default 30s)
	bash scripts/fuzz.sh

demo: ## with `make run` in another shell: a cancellation delivered before a stale "active" event
	$(GO) run . demo

changes-demo: ## three projected types, two facts, two effects: writes the change records to docs/changes-demo.md (Postgres at TEST_DATABASE_URL)
	HOOKYARD_CHANGES_DEMO_OUT=$(CURDIR)/docs/changes-demo.md $(GO) test ./internal/demo -run TestChangesDemo -count=1

SEED ?= 1
chaos: ## every service a process, faults from SEED, 10,000 subscriptions and 100,000 events at 100/s (about 20 min); prints the invariants table
	$(GO) build -o bin/hookyard . && bin/hookyard chaos -seed $(SEED) -subscriptions 10000 -events 100000

vet: ## go vet over every package
	$(GO) vet ./...

lint: ## staticcheck (pinned by go.mod's tool directive; checks in staticcheck.conf)
	$(GO) tool staticcheck ./...

help: ## this list
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
