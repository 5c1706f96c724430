#!/usr/bin/env bash
# make test-kafka: the tests that matter on a real Apache Kafka, against the
# three-node cluster of scripts/kafka.sh (started here when it is not up, and
# stopped at the end unless it was already up). First the Kafka-facing
# packages, whose shared helpers (internal/testkit/kafkatest, internal/testkit/pipelinetest) give
# each test a topic and a consumer group of its own on KAFKA_BROKERS; then the
# broker failures (e2e/brokerfault, built only with -tags realkafka): a
# partition leader killed with SIGKILL, a broker stopped for a minute. Their
# recovery figures are printed at the end; the full log of that run (the
# services' logs too) is kept in FAULT_LOG.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
# Every package whose tests touch Kafka: the end-to-end tests, the relay,
# the processor group (rebalance under load, zombie fencing, a member paused
# past its session timeout), partition replay, topic creation, the CLI
# (fence resize, replay), the reconciler and ops API over the pipeline, and
# the small chaos run (every service its own process, faults from a seed).
PACKAGES=(./e2e ./outbox-relay ./processor ./pkg/ops/replay ./pkg/topic ./internal/cli
	./reconciler ./pkg/ops/api ./pkg/ops/explain ./pkg/ops/metrics ./internal/chaos)
FAULT_LOG="${FAULT_LOG:-${TMPDIR:-/tmp}/hookyard-test-kafka-faults.log}"

was_up=0
bash scripts/kafka.sh status >/dev/null 2>&1 && was_up=1
started=$SECONDS
bash scripts/kafka.sh start
cleanup() {
	if ((was_up == 0)); then bash scripts/kafka.sh stop; fi
	echo "test-kafka: $((SECONDS - started)) s in all"
}
trap cleanup EXIT

export KAFKA_BROKERS
KAFKA_BROKERS="$(bash scripts/kafka.sh brokers)"
export HOOKYARD_KAFKA_SCRIPT="$PWD/scripts/kafka.sh"

# The containers test needs a Docker engine and its own Kafka; it is not a
# test of this cluster.
"$GO" test -race -count=1 -timeout 20m -skip 'OnRealServers' "${PACKAGES[@]}"

# -v for the recovery figures (t.Logf); the services' logs go to the file.
status=0
"$GO" test -tags realkafka -race -count=1 -timeout 20m -v ./e2e/brokerfault >"$FAULT_LOG" 2>&1 || status=$?
grep -E '^(--- |ok |FAIL|PASS)|recovery:|Error|_test.go:' "$FAULT_LOG" | grep -v '^time=' || true
if ((status != 0)); then
	echo "test-kafka: broker-failure tests failed; full log: $FAULT_LOG" >&2
	exit "$status"
fi
