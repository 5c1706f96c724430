// Package devpg runs a throwaway PostgreSQL server for `hookyard dev` on a
// machine where none is installed or running: it finds PostgreSQL's
// programs (Debian's packages if installed, else the zonky binaries from
// Maven Central fetched through mvn), initializes a data folder once and
// keeps it across runs, starts the server on loopback only and stops it
// when the dev run ends.
//
// It owns only that server's lifecycle. It must never be used by a
// production service, never listen beyond 127.0.0.1, and never signal a
// PostgreSQL it did not start from its own data folder (the machine's
// system server included).
package devpg
