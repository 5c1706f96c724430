# hookyard — `make run` starts the whole pipeline, `make test` runs every test.
GO ?= go
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/hookyard_test?sslmode=disable
export TEST_DATABASE_URL
# No DATABASE_URL default here: `hookyard dev` starts a PostgreSQL of its own
# only when DATABASE_URL is unset (and nothing answers on 127.0.0.1:5432).

.PHONY: run test test-short bench fuzz build vet lint

run: ## whole pipeline in one process: receiver :8080, ops API :8081, embedded Kafka :9092, Postgres from DATABASE_URL, else local :5432, else embedded
	$(GO) run . dev

build:
	$(GO) build -o bin/hookyard .

test: ## all tests, with the race detector, against local Postgres and in-process Kafka
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 15m ./...

test-short:
	$(GO) test -count=1 -short ./...

bench: ## receiver vs pgbench, processor throughput; prints tables
	$(GO) run ./cmd/hookyard-bench

fuzz: ## fuzz every provider adapter for 30s each
	for p in stripe chargebee github standardwebhooks; do \
		$(GO) test -run='^$$' -fuzz=FuzzVerify -fuzztime=30s ./pkg/provider/$$p/ || exit 1; \
	done
