#!/usr/bin/env bash
# Installs, configures and starts Debian's PostgreSQL for local development and CI:
# the postgres user connects over loopback without a password (trust on 127.0.0.1
# and ::1 only), and the server listens on 127.0.0.1:5432. Every step is
# idempotent: on a machine where it already ran, it only checks that the server
# answers. Needs root (apt-get, pg_ctlcluster). Never used by production services.
#
# AUTOVACUUM=off starts the cluster with autovacuum disabled, so the suite can be
# run on tables that never get statistics as well as with Debian's default (on).
set -euo pipefail

PGPORT=5432
ready() { pg_isready -h 127.0.0.1 -p "$PGPORT" -q 2>/dev/null; }

if ! command -v pg_ctlcluster >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  echo "postgres-local: installing Debian's postgresql"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
fi

version=$(ls /usr/lib/postgresql | sort -V | tail -n1)
conf=/etc/postgresql/$version/main
if [ ! -d "$conf" ]; then
  pg_createcluster "$version" main >/dev/null
fi

# Settings of our own in conf.d (Debian's postgresql.conf includes it).
want_autovacuum=${AUTOVACUUM:-on}
settings="listen_addresses = '127.0.0.1'
port = $PGPORT
max_connections = 300
autovacuum = $want_autovacuum"
restart=no
if [ "$(cat "$conf/conf.d/hookyard.conf" 2>/dev/null)" != "$settings" ]; then
  printf '%s\n' "$settings" >"$conf/conf.d/hookyard.conf"
  restart=yes
fi

# Trust for loopback TCP, first in the file so it wins over Debian's scram lines.
hba=$conf/pg_hba.conf
if ! grep -q '^# hookyard: loopback trust' "$hba"; then
  { echo '# hookyard: loopback trust'
    echo 'host all all 127.0.0.1/32 trust'
    echo 'host all all ::1/128 trust'
    cat "$hba"; } >"$hba.new"
  chown --reference="$hba" "$hba.new"; chmod --reference="$hba" "$hba.new"
  mv "$hba.new" "$hba"
  restart=yes
fi

status=$(pg_ctlcluster "$version" main status >/dev/null 2>&1 && echo up || echo down)
if [ "$status" = up ] && [ "$restart" = yes ]; then
  echo "postgres-local: restarting PostgreSQL $version with new settings"
  pg_ctlcluster --skip-systemctl-redirect "$version" main restart
elif [ "$status" = down ]; then
  echo "postgres-local: starting PostgreSQL $version (autovacuum $want_autovacuum)"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start
fi

for _ in $(seq 1 60); do ready && break; sleep 0.5; done
ready || { echo "postgres-local: PostgreSQL did not answer on 127.0.0.1:$PGPORT" >&2; exit 1; }
psql -h 127.0.0.1 -p "$PGPORT" -U postgres -Atqc "select 'postgres-local: ready, ' || version() || ', autovacuum ' || current_setting('autovacuum')"
