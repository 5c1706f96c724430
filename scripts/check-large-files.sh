#!/usr/bin/env bash
# Fails when a tracked file is larger than 1 MiB: build outputs and data dumps
# belong in .gitignore, not in the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check-large-files: not a git work tree; nothing to check"
  exit 0
fi
limit=$((1 << 20))
large=$(git ls-files -z | xargs -0 -r stat -c '%s %n' 2>/dev/null | awk -v l="$limit" '$1 > l')
if [ -n "$large" ]; then
  echo "check-large-files: tracked files over 1 MiB (remove them, add them to .gitignore):" >&2
  echo "$large" >&2
  exit 1
fi
