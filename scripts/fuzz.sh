#!/usr/bin/env bash
# Runs every Go fuzz target in the module for FUZZTIME each (default 30s).
# Targets are found by name (func FuzzXxx in *_test.go), so a new one is
# fuzzed without editing this script.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-30s}
n=0
while IFS=: read -r file _ line; do
  target=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$line")
  pkg=./$(dirname "$file")
  echo "fuzz: $pkg $target ($fuzztime)"
  go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg"
  n=$((n + 1))
done < <(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . | sed 's#^\./##' | sort)
echo "fuzz: $n targets, $fuzztime each, no failures"
