// Package chaos proves hookyard's invariants under live traffic and faults.
// It runs the real services as separate processes of the hookyard binary
// (receiver over HTTP, two outbox relays, three processors in one group, the
// reconciler and the query/ops API) on a fresh database and a Kafka cluster,
// drives them with seeded provider lifecycles delivered out of order, twice,
// concurrently or never, and injects faults from the same seed: processors
// killed with -9 and restarted, a processor frozen with SIGSTOP past its
// session timeout and resumed, a relay killed, Postgres backends terminated,
// partition leaders and group coordinators moved. When the system quiesces
// it checks every invariant against the simulators' truth and prints one
// table; a violation prints the resource's explain timeline.
//
// The same seed gives the same schedule (lifecycles, delivery plan, faults);
// timing between processes is the operating system's, so an interleaving
// that found a bug is likely, not certain, to recur.
//
// It never touches a database or a broker it did not create, except a real
// Kafka cluster named in KAFKA_BROKERS, where it uses its own topic and
// group.
package chaos
