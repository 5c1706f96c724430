package config

import (
	"errors"
	"fmt"
	"strings"
)

// Vars are the environment variables hookyard itself reads, each of which
// may instead name a file in NAME_FILE (the convention of Docker and
// Kubernetes secrets). Every OTEL_* variable may too: the OpenTelemetry
// SDK reads those.
var Vars = []string{
	"DATABASE_URL", "HTTP_ADDR", "OPS_ADDR", "METRICS_ADDR", "OPS_TOKEN",
	"STRIPE_API_BASE", "STRIPE_API_KEY", "GITHUB_API_BASE", "RECEIPT_WEBHOOK_URL", "KAFKA_BROKERS",
	"HOOKYARD_CONFIG", "LOG_LEVEL", "SIM_ADDR", "HOOKYARD_DEV_POSTGRES_PORT",
}

// ResolveFileVars makes NAME_FILE work for every variable of Vars and
// every OTEL_* variable: each one that is unset or empty while NAME_FILE
// names a file is set (with set) to that file's contents, trailing
// newline dropped. The binary calls it once, first, with the process
// environment, so that every later reader (its own, and libraries that
// read os.Getenv) sees one value. environ is os.Environ().
func ResolveFileVars(environ []string, lookup func(string) (string, bool), set func(k, v string) error) error {
	names := append([]string(nil), Vars...)
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if name, ok := strings.CutSuffix(k, "_FILE"); ok && strings.HasPrefix(name, "OTEL_") {
			names = append(names, name)
		}
	}
	var errs []error
	for _, name := range names {
		if v, ok := lookup(name); ok && v != "" {
			continue
		}
		path, ok := lookup(name + "_FILE")
		if !ok || path == "" {
			continue
		}
		v, err := readSecretFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s_FILE: %w", name, err))
			continue
		}
		if err := set(name, v); err != nil {
			errs = append(errs, fmt.Errorf("set %s from %s_FILE: %w", name, name, err))
		}
	}
	return errors.Join(errs...)
}

// IsSet reports whether name, or the file NAME_FILE names, gives a value:
// a decision that depends on whether a variable is configured must see
// both spellings.
func IsSet(lookup func(string) (string, bool), name string) bool {
	if v, ok := lookup(name); ok && v != "" {
		return true
	}
	path, ok := lookup(name + "_FILE")
	return ok && path != ""
}
