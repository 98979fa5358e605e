#!/usr/bin/env bash
# Installs the PostgreSQL server binaries (initdb, postgres) from the distribution's packages
# when they cannot be found, for the tests' throwaway servers (drift-testkit-pg). It looks
# where the harness looks: DRIFT_PG_BIN, PATH, /usr/lib/postgresql/*/bin, /usr/local/pgsql/bin.
# No cluster is created and no service is started: the tests start their own servers.
set -euo pipefail

found() {
  if [ -n "${DRIFT_PG_BIN:-}" ] && [ -x "$DRIFT_PG_BIN/initdb" ] && [ -x "$DRIFT_PG_BIN/postgres" ]; then
    return 0
  fi
  if command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; then
    return 0
  fi
  local d
  for d in /usr/lib/postgresql/*/bin /usr/local/pgsql/bin; do
    if [ -x "$d/initdb" ] && [ -x "$d/postgres" ]; then
      return 0
    fi
  done
  return 1
}

if found; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-postgres.sh: initdb/postgres not found and no apt-get here; install the PostgreSQL server binaries (or set DRIFT_PG_BIN)" >&2
  exit 1
fi

sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# postgresql-common first, told not to create (and start) a default cluster.
$sudo apt-get install -y -qq postgresql-common >/dev/null
if [ -f /etc/postgresql-common/createcluster.conf ]; then
  $sudo sed -i 's/^#\?\s*create_main_cluster\s*=.*/create_main_cluster = false/' /etc/postgresql-common/createcluster.conf
fi
$sudo apt-get install -y -qq postgresql >/dev/null

if ! found; then
  echo "install-postgres.sh: installed the postgresql package but still cannot find initdb" >&2
  exit 1
fi
echo "install-postgres.sh: PostgreSQL server binaries installed under $(ls -d /usr/lib/postgresql/*/bin | tail -1)"
