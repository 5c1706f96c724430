package cli

import (
	"cmp"
	"context"
	"io"
	"strings"

	outboxrelay "github.com/hookyard/hookyard/outbox-relay"
	"github.com/hookyard/hookyard/pkg/config"
)

// kind is what a command needs from the binary before its run func starts.
type kind int

// heading is the usage section of each kind, in the order printed.
var heading = []struct {
	kind  kind
	title string
}{
	{service, "Services (scale each separately):"},
	{client, "Proof:"},
	{ops, "Operations:"},
	{stream, "Changes out:"},
}

// command is one subcommand of the binary. Dispatch, the checks before it
// runs (dev defaults, tracing), its pool size and its lines of the usage
// text all come from its row of the table below; only the rule that dev
// alone may start a database of its own (devdb.go) names a command
// elsewhere.
type command struct {
	name string
	// usage is the command's lines in the usage text, verbatim: synopsis,
	// then the summary at column 18 (services, proof) or 43 (operations).
	usage string
	kind  kind
	// devDefaults marks the one command allowed to run on the dev token and
	// the example config's dev secrets: dev, on a laptop, loopback only.
	devDefaults bool
	// conns is the pool's size; nil means defaultConns.
	conns func(*config.Config) int32
	// run runs the command. e.pool is nil for a client.
	run func(ctx context.Context, e *env, args []string, stdout io.Writer) error
}

// defaultConns is the pool size of a command that names none.
const defaultConns = 4

var commands = []command{
	{name: "receiver", kind: service, run: runReceiver, conns: fixedConns(24),
		usage: "  receiver        POST /webhooks/{endpoint_id} on HTTP_ADDR (default 127.0.0.1:8080)\n"},
	{name: "outbox-relay", kind: service, run: runRelay,
		// Claims in flight, the listener, a scrape.
		conns: func(cfg *config.Config) int32 {
			return int32(cmp.Or(cfg.Relay.InFlight, outboxrelay.InFlightDefault) + 2)
		},
		usage: "  outbox-relay    publish outbox rows to Kafka\n"},
	{name: "processor", kind: service, run: runProcessor,
		// The effects sender's claims and outcome writes on top.
		conns: fixedConns(defaultConns + 2),
		usage: "  processor       consume the events topic and keep projections; also sends external effects\n"},
	{name: "effects", kind: service, run: runEffects,
		usage: "  effects         send external effects only (receipts to RECEIPT_WEBHOOK_URL), for scaling them apart\n"},
	{name: "reconciler", kind: service, run: runReconciler,
		usage: "  reconciler      enqueue checks for what no webhook told us\n"},
	{name: "api", kind: service, run: runAPI,
		usage: "  api             query/ops API on OPS_ADDR (default 127.0.0.1:8081)\n"},
	{name: "dev", kind: service, devDefaults: true, run: runDevCmd, conns: fixedConns(24),
		usage: `  dev [-listen-public]
                  all of the above in one process, embedded Kafka and Stripe simulator; with
                  DATABASE_URL unset and nothing on 127.0.0.1:5432, an embedded PostgreSQL too
                  (data in /var/lib/hookyard/dev-postgres as root, else ~/.local/state/hookyard);
                  loopback addresses only unless -listen-public
`},

	{name: "demo", kind: client, run: runDemo,
		usage: `  demo [-sim URL] [-receiver URL] [-ops URL]
                  against a running ` + "`make run`" + `: cancel a subscription, deliver the cancellation
                  first and an older "active" event after it (twice); print a naive consumer's
                  decision beside hookyard's, and the explain timeline
`},
	{name: "chaos", kind: client, run: runChaos,
		usage: `  chaos [-seed N] [-subscriptions N] [-events N] [-rate N] [-keep]
                  run every service as its own process of this binary, with disordered,
                  duplicated and dropped deliveries and faults from the seed; print the
                  invariants table (exit 1 on a violation, with its explain timeline)
`},

	{name: "migrate", kind: ops, run: runMigrate,
		usage: "  migrate                                  create the database if missing and apply migrations\n"},
	{name: "events", kind: ops, run: eventsCmd,
		usage: "  events [-status dead] [-limit N]         list events by status (dead, retrying, pending, ...)\n"},
	{name: "explain", kind: ops, run: explainCmd,
		usage: `  explain PROVIDER ACCOUNT ENV TYPE ID [-json] [-limit N]
                                           why a resource is in its state: projection, access, and its
                                           timeline of events, decisions, fetches and reconcile checks
`},
	{name: "replay", kind: ops, run: replay,
		usage: `  replay event PROVIDER ACCOUNT ENV EVENT_ID
  replay dead [-since 24h] [-limit N]      replay dead events through the outbox
  replay resource PROVIDER ACCOUNT ENV TYPE ID [-since 24h]
  replay partition -partition N (-from-offset O | -since 2h|RFC3339) [-to-offset O] [-limit N]
                                           re-enqueue one partition's records up to its high watermark
                                           (-to-offset exclusive); the processors keep running
`},
	{name: "dead", kind: ops, run: deadCmd,
		usage: `  dead list [-provider P] [-account A] [-environment E] [-type T] [-resource-type T] [-resource ID]
            [-since 24h|RFC3339] [-limit N]
                                           dead events with attempts, next attempt, last error, resource
  dead show PROVIDER ACCOUNT ENV EVENT_ID [-payload]
                                           one event and its history entries
  dead replay PROVIDER ACCOUNT ENV EVENT_ID    replay one dead event (refused if it is not dead)
  dead replay [filters of dead list] [-limit N]
`},
	{name: "parked", kind: ops, run: parkedCmd,
		usage: `  parked list [-provider P] [-account A] [-environment E] [-limit N]
                                           projections parked for reconciliation (version gap, conflict,
                                           unordered) with why, since when and the last check sent
`},
	{name: "reconcile", kind: ops, run: runReconcile,
		usage: `  reconcile [-provider P] [-account A] [-environment E]
                                           run one reconcile round now over the selected sources and print
                                           per source the listings walked, checks, divergences, events
                                           ingested, redeliveries asked, errors, and the checkpoints
`},
	{name: "purge", kind: ops, run: purgeCmd,
		usage: `  purge [-older-than 720h] [-dry-run]      drop payloads of finished events, keep their identities
                                           (rows received before migration 00021; later bodies go by
                                           partition, see retention; default: retention.payload_age;
                                           never younger than retention.min_purge_age); -dry-run counts
`},
	{name: "retention", kind: ops, run: retentionCmd,
		usage: `  retention                                one retention pass now, as the reconciler runs every round:
                                           create partitions ahead, drop those behind retention.payload_age,
                                           forget identities past retention.identity_age, delete subscribers'
                                           deliveries settled before retention.delivery_age; prints each change
`},
	{name: "actions", kind: ops, run: actionsCmd,
		usage: `  actions list [-status dead] [-provider P] [-account A] [-environment E] [-kind receipt]
               [-since 24h|RFC3339] [-limit N]
                                           external effects (dead by default) with attempts, next attempt, last error
  actions show PROVIDER ACCOUNT ENV SUBJECT KIND
                                           one action, whatever its status, with its fact and idempotency key
  actions replay PROVIDER ACCOUNT ENV SUBJECT KIND   send a dead action again, same key (refused if not dead)
  actions replay [filters of actions list] [-limit N]
  actions skip PROVIDER ACCOUNT ENV SUBJECT KIND [-reason R]
                                           give a dead action up: skipped, never sent; the later changes of
                                           its resource go out to that subscriber (refused if not dead), audited
`},
	{name: "erase", kind: ops, run: eraseCmd,
		usage: `  erase -account A [-resource R] [-provider P] [-environment E]
                                           remove an account's (or its resources') personal data from every
                                           table for an erasure request, publish the erased states to the
                                           changes topic; prints rows per table, audited
`},
	{name: "audit", kind: ops, run: auditCmd,
		usage: `  audit [-since 24h|RFC3339] [-limit N]    payload reads and changes (replays, purges, erasures, resizes) by the
                                           ops API and this CLI: who, what, when, which, how many rows
`},
	{name: "fence", kind: ops, run: fenceCmd,
		usage: `  fence status                             partition generations and the fenced partition count
  fence resize -partitions N [-force]      grow the topic and re-fence (processors stopped, lag 0)
`},

	{name: "changes", kind: stream, run: changesCmd,
		usage: `  changes tail [-type T] [-account A] [-provider P] [-environment E] [-from-beginning]
                                           follow the compacted changes topic (kafka.changes_topic), one JSON
                                           line per applied projection change; -from-beginning replays
                                           every current projection first
  changes republish [-batch N]             queue every stored projection on the changes topic again
                                           (decision "current"; opens DATABASE_URL): after an upgrade,
                                           for projections stored before changes were published
`},
}

func fixedConns(n int32) func(*config.Config) int32 {
	return func(*config.Config) int32 { return n }
}

// lookup returns the command named name.
func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

const usageHead = `hookyard — webhooks into correct state, whatever order they arrive in.

Usage: hookyard [-config FILE] <command> [args]
`

const usageEnv = `Environment: DATABASE_URL, HTTP_ADDR, OPS_ADDR, OPS_TOKEN (or OPS_TOKEN_FILE; any VAR as VAR_FILE),
METRICS_ADDR, KAFKA_BROKERS, STRIPE_API_BASE, GITHUB_API_BASE, STRIPE_API_KEY (API key of Stripe endpoints
without their own api_key), RECEIPT_WEBHOOK_URL (where receipts are POSTed), HOOKYARD_CONFIG (default
hookyard.example.yaml), LOG_LEVEL, SIM_ADDR (dev only).
`

// usage is the help text: each kind's commands under its heading, in the
// table's order.
var usage = func() string {
	var b strings.Builder
	b.WriteString(usageHead)
	for _, h := range heading {
		b.WriteString("\n" + h.title + "\n")
		for _, c := range commands {
			if c.kind == h.kind {
				b.WriteString(c.usage)
			}
		}
	}
	b.WriteString("\n" + usageEnv)
	return b.String()
}()
