// Package audit owns ops_audit: the record of every read of personal data
// (payloads) and every operation that changes state (replays, purges,
// action replays, fence resizes), by the ops API and by the CLI. Each
// record says who (a token's name, or cli:<OS user>), what, when, which
// identity or filter, and how many rows.
//
// It records identities and filters only, never a payload or a secret, and
// it never decides whether an operation may run: the API's scopes do.
package audit
