// Package subscriber delivers the changes topic to internal subscribers as
// outbound webhooks signed with the Standard Webhooks scheme, through the
// effects machinery: the Feeder reads the changes topic and records, for
// every change and every subscriber that takes it, an action of kind
// "change:<subscriber>" (package action) whose body is the change record's
// bytes; the effects sender claims those actions in order per resource and
// POSTs them signed (Sign).
//
// One change is one action per subscriber, keyed by the resource and the
// observation that made the change (its provider version, its fetch
// sequence number, or both: Subject), so a re-read of the topic, a
// republished projection or a redelivered record names the same action and
// records nothing new. The feeder commits its Kafka offsets only after the
// transaction that recorded the actions committed: a crash re-reads, it
// never skips.
//
// This package holds no SQL (the action statements are package action's)
// and makes no HTTP call (the sender is package effects); it never decides
// a delivery from the current projection: what is delivered is the record
// as the topic carries it.
package subscriber
