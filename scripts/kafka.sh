#!/usr/bin/env bash
# A three-node Apache Kafka cluster (KRaft, every node broker and controller)
# on loopback, for `make kafka` / `make test-kafka`. The broker comes from Maven
# Central through kafka/pom.xml; nothing but that pom and this script is
# committed. Data, logs and pid files live under HOOKYARD_KAFKA_DATA.
#
#   scripts/kafka.sh start            fetch (first time), format, start all, wait, print version
#   scripts/kafka.sh stop             stop every node (SIGTERM, SIGKILL after 30 s) and delete the data
#   scripts/kafka.sh status           one line per node; exit 1 unless all three run
#   scripts/kafka.sh brokers          the bootstrap list (for KAFKA_BROKERS)
#   scripts/kafka.sh version          the Apache Kafka release the pom fetched
#   scripts/kafka.sh kill N           SIGKILL node N (1-3): a crash, no controlled shutdown
#   scripts/kafka.sh stop-node N      SIGTERM node N and wait for it to exit
#   scripts/kafka.sh start-node N     start node N again on its existing data
#   scripts/kafka.sh restart N        stop-node N, then start-node N
#
# Ports: node N serves clients on 1909(1+N) (19092-19094) and the controller
# quorum on 1909(4+N) (19095-19097). Replication factor 3, min.insync.replicas 2.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
POM_DIR="$ROOT/kafka"
LIB="$POM_DIR/target/lib"
DATA="${HOOKYARD_KAFKA_DATA:-${TMPDIR:-/tmp}/hookyard-kafka}"
NODES=(1 2 3)
HEAP="${HOOKYARD_KAFKA_HEAP:--Xms256m -Xmx512m}"
# A kill -9 test restarts a node long before log recovery matters; a clean
# start after a crash must not take minutes, so wait at most this long.
READY_TIMEOUT="${HOOKYARD_KAFKA_READY_TIMEOUT:-120}"

client_port() { echo $((19091 + $1)); }
controller_port() { echo $((19094 + $1)); }
node_dir() { echo "$DATA/node$1"; }
pid_of() {
	local f
	f="$(node_dir "$1")/pid"
	[[ -f $f ]] && cat "$f"
}
# A pid file outlives a machine restart; its pid may since belong to another
# process, which must not pass for the node (nor be killed as it).
running() {
	local pid
	pid="$(pid_of "$1" || true)"
	[[ -n $pid ]] && kill -0 "$pid" 2>/dev/null &&
		ps -p "$pid" -o args= 2>/dev/null | grep -qF "$(node_dir "$1")/server.properties"
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
check_node() {
	[[ $1 =~ ^[123]$ ]] || {
		echo "kafka.sh: node must be 1, 2 or 3, not '$1'" >&2
		exit 2
	}
}

brokers() {
	local out=() n
	for n in "${NODES[@]}"; do out+=("127.0.0.1:$(client_port "$n")"); done
	(IFS=,; echo "${out[*]}")
}

# The machine image has Java 17 and Maven; a machine without them gets
# Debian's (as root, like scripts/postgres-local.sh).
ensure_tools() {
	command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 && return 0
	echo "kafka.sh: installing Debian's Java runtime and Maven" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq openjdk-17-jre-headless maven >/dev/null
}

classpath() {
	ensure_tools
	if [[ ! -f $LIB/.complete ]]; then
		echo "kafka.sh: fetching the broker with Maven (kafka/pom.xml) ..." >&2
		rm -rf "$LIB"
		mkdir -p "$POM_DIR/target"
		mvn -q -B -f "$POM_DIR/pom.xml" dependency:copy-dependencies \
			-DoutputDirectory="$LIB" -DincludeScope=runtime >"$POM_DIR/target/mvn.log" 2>&1 || {
			cat "$POM_DIR/target/mvn.log" >&2
			return 1
		}
		touch "$LIB/.complete"
	fi
	echo "$LIB/*"
}

version() {
	# kafka-clients' jar carries the release it belongs to.
	local jar
	jar="$(ls "$LIB"/kafka-clients-*.jar 2>/dev/null | head -1)"
	[[ -n $jar ]] && basename "$jar" .jar | sed 's/^kafka-clients-//'
}

write_properties() {
	local n=$1 dir voters="" m
	dir="$(node_dir "$n")"
	for m in "${NODES[@]}"; do voters+="${voters:+,}$m@127.0.0.1:$(controller_port "$m")"; done
	mkdir -p "$dir/data"
	cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$(client_port "$n"),CONTROLLER://127.0.0.1:$(controller_port "$n")
advertised.listeners=PLAINTEXT://127.0.0.1:$(client_port "$n")
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.partitions=3
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
offsets.topic.num.partitions=12
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
# Tests create their topics through the admin API; a typo must not
# quietly create a one-partition topic.
auto.create.topics.enable=false
delete.topic.enable=true
# Tests start consumer groups all the time; the default 3 s wait before the
# first rebalance only slows them.
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=4
num.replica.fetchers=1
background.threads=4
log.segment.bytes=16777216
log.retention.hours=24
EOF
}

format_node() {
	local n=$1 cp=$2 dir cid
	dir="$(node_dir "$n")"
	[[ -f $dir/data/meta.properties ]] && return 0
	cid="$(cat "$DATA/cluster.id")"
	java -cp "$cp" kafka.tools.StorageTool format -t "$cid" -c "$dir/server.properties" >"$dir/format.log" 2>&1 || {
		cat "$dir/format.log" >&2
		return 1
	}
}

launch() {
	local n=$1 cp=$2 dir
	dir="$(node_dir "$n")"
	if running "$n"; then return 0; fi
	# wait_ready reads the log from the last such line on: an earlier run's
	# "started" must not make a restarted node look ready.
	echo "=== launch $(date -u +%FT%TZ) ===" >>"$dir/server.log"
	# setsid: the node outlives the shell (and make) that started it, and a
	# test's kill of node N never reaches the others.
	# shellcheck disable=SC2086
	setsid java $HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
		-Dorg.slf4j.simpleLogger.defaultLogLevel=info \
		-Dorg.slf4j.simpleLogger.showDateTime=true \
		-Dorg.slf4j.simpleLogger.log.kafka.server.KafkaApis=warn \
		-cp "$cp" kafka.Kafka "$dir/server.properties" >>"$dir/server.log" 2>&1 </dev/null &
	echo $! >"$dir/pid"
}

started() {
	awk '/^=== launch /{ok=0} /Kafka Server started/{ok=1} END{exit !ok}' "$(node_dir "$1")/server.log" 2>/dev/null
}

wait_ready() {
	local deadline=$((SECONDS + READY_TIMEOUT)) n
	for n in "$@"; do
		until port_open "$(client_port "$n")" && started "$n"; do
			if ! running "$n"; then
				echo "kafka.sh: node $n exited; last lines of $(node_dir "$n")/server.log:" >&2
				tail -20 "$(node_dir "$n")/server.log" >&2
				return 1
			fi
			if ((SECONDS > deadline)); then
				echo "kafka.sh: node $n not ready after ${READY_TIMEOUT}s; see $(node_dir "$n")/server.log" >&2
				return 1
			fi
			sleep 0.5
		done
	done
}

start_all() {
	local n up=0 cp
	for n in "${NODES[@]}"; do running "$n" && up=$((up + 1)); done
	if ((up == ${#NODES[@]})); then
		echo "Apache Kafka $(version) already up: $(brokers) (data $DATA)"
		return 0
	fi
	cp="$(classpath)"
	mkdir -p "$DATA"
	[[ -f $DATA/cluster.id ]] || java -cp "$cp" kafka.tools.StorageTool random-uuid 2>/dev/null >"$DATA/cluster.id"
	for n in "${NODES[@]}"; do
		write_properties "$n"
		format_node "$n" "$cp"
	done
	for n in "${NODES[@]}"; do launch "$n" "$cp"; done
	wait_ready "${NODES[@]}"
	echo "Apache Kafka $(version) up: $(brokers) (KRaft, 3 nodes, RF 3, min.insync.replicas 2, data $DATA)"
}

stop_node() {
	local n=$1 pid i
	running "$n" || return 0
	pid="$(pid_of "$n")"
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 300; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
}

stop_all() {
	local n pid
	# The controllers need a quorum to let brokers shut down cleanly, so send
	# every node its SIGTERM at once rather than one after another.
	for n in "${NODES[@]}"; do
		if running "$n"; then kill -TERM "$(pid_of "$n")" 2>/dev/null || true; fi
	done
	for n in "${NODES[@]}"; do stop_node "$n"; done
	rm -rf "$DATA"
	echo "Apache Kafka stopped (data removed)"
}

status() {
	local n all=0
	for n in "${NODES[@]}"; do
		if running "$n"; then
			echo "node $n: up, pid $(pid_of "$n"), 127.0.0.1:$(client_port "$n")"
		else
			echo "node $n: down"
			all=1
		fi
	done
	return $all
}

cmd="${1:-}"
case "$cmd" in
start) start_all ;;
stop) stop_all ;;
status) status ;;
brokers) brokers ;;
version) version ;;
kill)
	check_node "${2:-}"
	if running "$2"; then kill -KILL "$(pid_of "$2")" 2>/dev/null || true; fi
	;;
stop-node)
	check_node "${2:-}"
	stop_node "$2"
	;;
start-node)
	check_node "${2:-}"
	launch "$2" "$(classpath)"
	wait_ready "$2"
	;;
restart)
	check_node "${2:-}"
	stop_node "$2"
	launch "$2" "$(classpath)"
	wait_ready "$2"
	;;
*)
	sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
