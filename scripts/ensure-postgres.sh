#!/usr/bin/env bash
# Make sure a PostgreSQL server answers on 127.0.0.1:5432 for the store tests, installing and
# starting Debian's package on a fresh machine. Prints the URL the tests should use.
set -euo pipefail

url_trust="postgres://postgres@127.0.0.1:5432/postgres"
url_pass="postgres://postgres:slipway-test@127.0.0.1:5432/postgres"

works() { PGCONNECT_TIMEOUT=3 psql "$1" -tAc 'select 1' >/dev/null 2>&1; }

if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "ensure-postgres: installing Debian's postgresql" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
fi

if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  echo "ensure-postgres: starting PostgreSQL $version" >&2
  pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 || true
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi

if works "$url_trust"; then echo "$url_trust"; exit 0; fi
if works "$url_pass"; then echo "$url_pass"; exit 0; fi
# A fresh Debian cluster asks for a password over TCP: give the postgres role one for the tests.
echo "ensure-postgres: setting a test password for the postgres role" >&2
su postgres -c "psql -qc \"ALTER USER postgres PASSWORD 'slipway-test'\"" >&2
works "$url_pass" || { echo "ensure-postgres: PostgreSQL does not accept connections" >&2; exit 1; }
echo "$url_pass"
