#!/usr/bin/env bash
# Makes sure the test database answers before `make test`: when
# TEST_DATABASE_URL is the default (loopback :5432) and nothing answers there,
# installs and starts Debian's PostgreSQL (scripts/postgres-local.sh, needs
# root). A TEST_DATABASE_URL of your own is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
default="postgres://postgres@127.0.0.1:5432/hookyard_test?sslmode=disable"
if [ "${TEST_DATABASE_URL:-$default}" != "$default" ]; then
  exit 0
fi
if (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "test-db: nothing answers on 127.0.0.1:5432; run 'sudo bash scripts/postgres-local.sh' or set TEST_DATABASE_URL" >&2
  exit 1
fi
echo "test-db: nothing answers on 127.0.0.1:5432; starting Debian's PostgreSQL"
bash scripts/postgres-local.sh
