#!/usr/bin/env bash
# Make sure the Docker Engine has the locally built images of the database servers Slipway runs
# when it reaches no registry (src/modules/databases/servers.ts, localImage):
#   slipway-local/postgresql:latest  PostgreSQL 15 (Debian's postgresql-15)
#   slipway-local/mysql:latest       MariaDB 10.11 (Debian's mariadb-server-core)
#   slipway-local/redis:latest       Redis 7.0 (Debian's redis-server)
# Each is a Debian bookworm root filesystem: one `debootstrap --variant=minbase` from Debian's
# mirror brought up to date from bookworm-updates and bookworm-security, copied once per image,
# the server installed into the copy with apt-get (no recommends, no docs, man pages or
# translations) and `docker import`ed with an entrypoint (written below) that honours the
# environment and command of the official image of its kind: POSTGRES_*, MYSQL_* / MARIADB_*,
# `redis-server ARGS`.
#
# An image is built only when it is missing or was built by another version of this file: its
# label slipway.local.recipe is the sha256 of this file (SLIPWAY_DB_IMAGES_FORCE=1 rebuilds
# anyway, e.g. for newer Debian packages). The images never carry slipway.test.run: they stay
# cached between test runs. Two callers at once take turns (flock on $lock); the images are made
# side by side from the shared base. Needs root (debootstrap, chroot; apt-get installs
# debootstrap when missing) and a Docker Engine (scripts/ensure-docker.sh). Says one line per
# image on stderr; exits non-zero with the reason (and the end of the build log) when it cannot.
# SLIPWAY_DB_IMAGES_LOGS=DIR keeps the build logs there; SLIPWAY_DB_IMAGES_PARALLEL=0 builds one
# image after the other; SLIPWAY_DEBIAN_MIRROR and SLIPWAY_DEBIAN_SECURITY_MIRROR name other mirrors.
#
# Usage: scripts/ensure-db-images.sh [postgresql|mysql|redis ...]   (none: all three)
set -euo pipefail

mirror=${SLIPWAY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${SLIPWAY_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
suite=bookworm
lock=/tmp/slipway-db-images.lock
# 1: make the images side by side once the base is there (measured on 2 cores: 38 s for the three
# against 47 s one after the other; the base takes 65-75 s either way)
parallel=${SLIPWAY_DB_IMAGES_PARALLEL:-1}
force=${SLIPWAY_DB_IMAGES_FORCE:-0}
ALL_KINDS=(postgresql mysql redis)

say() { echo "ensure-db-images: $*" >&2; }
fail() { say "$*"; exit 1; }

self=$(readlink -f -- "${BASH_SOURCE[0]}")
recipe=$(sha256sum -- "$self" | cut -d' ' -f1)

image_of() { echo "slipway-local/$1:latest"; }
recipe_of() { docker image inspect --format '{{index .Config.Labels "slipway.local.recipe"}}' "$1" 2>/dev/null || true; }
up_to_date() { [ "$force" != 1 ] && [ "$(recipe_of "$(image_of "$1")")" = "$recipe" ]; }

# --- which images ----------------------------------------------------------------------------
kinds=()
for arg in "$@"; do
  case $arg in
    postgresql | mysql | redis) [[ " ${kinds[*]-} " == *" $arg "* ]] || kinds+=("$arg") ;;
    -h | --help) sed -n '2,/^set -euo/p' "$self" | sed '$d; s/^# \{0,1\}//' >&2; exit 0 ;;
    *) fail "unknown image '$arg': usage: $0 [postgresql|mysql|redis ...]" ;;
  esac
done
[ ${#kinds[@]} -gt 0 ] || kinds=("${ALL_KINDS[@]}")

timeout 10 docker version >/dev/null 2>&1 ||
  fail "no Docker Engine answers \`docker version\`; run scripts/ensure-docker.sh first."

stale() {
  todo=()
  local kind
  for kind in "${kinds[@]}"; do up_to_date "$kind" || todo+=("$kind"); done
}
stale
report_up_to_date() {
  local kind
  for kind in "${kinds[@]}"; do [[ " ${todo[*]-} " == *" $kind "* ]] || say "$(image_of "$kind") is up to date"; done
}
if [ ${#todo[@]} -eq 0 ]; then report_up_to_date; exit 0; fi

[ "$(id -u)" -eq 0 ] || fail "building ${todo[*]} needs root (debootstrap, chroot): run it as root (sudo)."

# --- one build at a time on this machine -----------------------------------------------------
exec 9>"$lock"
if ! flock -n 9; then
  say "another ensure-db-images.sh is building; waiting for it (lock $lock)"
  flock 9
  stale
  if [ ${#todo[@]} -eq 0 ]; then report_up_to_date; exit 0; fi
fi
report_up_to_date

if ! command -v debootstrap >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || fail "debootstrap is missing and there is no apt-get: install debootstrap and run again."
  say "installing debootstrap with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends debootstrap; } >/dev/null ||
    fail "apt-get could not install debootstrap."
fi
[ -e "/usr/share/debootstrap/scripts/$suite" ] || fail "this debootstrap does not know Debian $suite: install a newer debootstrap."

workdir=$(mktemp -d /var/tmp/slipway-db-images.XXXXXX)
pids=()
cleanup() {
  local pid m
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  # debootstrap mounts /proc, /sys and sometimes /dev into its target: never delete through them
  while read -r m; do umount -l -- "$m" 2>/dev/null || true; done < <(awk -v d="$workdir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r)
  if [ -n "${SLIPWAY_DB_IMAGES_LOGS:-}" ]; then
    mkdir -p -- "$SLIPWAY_DB_IMAGES_LOGS"
    cp -- "$workdir"/*.log "$SLIPWAY_DB_IMAGES_LOGS"/ 2>/dev/null || true
  fi
  rm -rf --one-file-system -- "$workdir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the entrypoints, written into each root filesystem as /usr/local/bin/docker-entrypoint.sh ---

write_postgresql_entrypoint() {
  cat >"$1" <<'ENTRYPOINT'
#!/bin/bash
# slipway-local/postgresql: the official postgres image's contract on Debian's PostgreSQL 15.
# Reads POSTGRES_PASSWORD (required unless POSTGRES_HOST_AUTH_METHOD=trust), POSTGRES_USER
# (postgres), POSTGRES_DB (= user), PGDATA (/var/lib/postgresql/data), POSTGRES_INITDB_ARGS,
# POSTGRES_INITDB_WALDIR, POSTGRES_HOST_AUTH_METHOD (scram-sha-256), each also as *_FILE, and runs
# /docker-entrypoint-initdb.d/*.sh|*.sql|*.sql.gz once, on the first start with an empty PGDATA.
set -Eeo pipefail

note() { printf '%s [entrypoint] %s\n' "$(date -u '+%F %T UTC')" "$*" >&2; }

# VAR [DEFAULT]: VAR, else the content of the file VAR_FILE names, else DEFAULT
file_env() {
  local var=$1 file_var="${1}_FILE" value=${2:-}
  if [ -n "${!var:-}" ] && [ -n "${!file_var:-}" ]; then note "both $var and $file_var are set (but are exclusive)"; exit 1; fi
  if [ -n "${!var:-}" ]; then value=${!var}; elif [ -n "${!file_var:-}" ]; then value=$(<"${!file_var}"); fi
  export "$var=$value"
  unset "$file_var"
}

# `postgres --version` and the like only print: no initialization for them
wants_help() {
  local arg
  for arg; do case $arg in -'?' | --help | --describe-config | -V | --version) return 0 ;; esac; done
  return 1
}

if [ "${1:0:1}" = '-' ]; then set -- postgres "$@"; fi

if [ "$1" = postgres ] && ! wants_help "$@"; then
  export PGDATA=${PGDATA:-/var/lib/postgresql/data}
  if [ "$(id -u)" = 0 ]; then
    # a fresh named volume is root's: make it the postgres user's, 0700, then run as postgres
    mkdir -p "$PGDATA" /var/run/postgresql
    chown postgres:postgres /var/run/postgresql && chmod 3777 /var/run/postgresql
    find "$PGDATA" \! -user postgres -exec chown postgres:postgres '{}' +
    chmod 0700 "$PGDATA"
    if [ -n "${POSTGRES_INITDB_WALDIR:-}" ]; then
      mkdir -p "$POSTGRES_INITDB_WALDIR"
      find "$POSTGRES_INITDB_WALDIR" \! -user postgres -exec chown postgres:postgres '{}' +
      chmod 0700 "$POSTGRES_INITDB_WALDIR"
    fi
    export HOME=/var/lib/postgresql
    exec setpriv --reuid=postgres --regid=postgres --init-groups -- "${BASH_SOURCE[0]}" "$@"
  fi
  mkdir -p "$PGDATA" 2>/dev/null || true
  chmod 0700 "$PGDATA" 2>/dev/null || true

  if [ -s "$PGDATA/PG_VERSION" ]; then
    note "PostgreSQL data directory $PGDATA holds a database; skipping initialization"
  else
    file_env POSTGRES_PASSWORD
    file_env POSTGRES_USER postgres
    file_env POSTGRES_DB "$POSTGRES_USER"
    file_env POSTGRES_INITDB_ARGS
    auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
    if [ -z "$POSTGRES_PASSWORD" ] && [ "$auth" != trust ]; then
      cat >&2 <<'EOE'
Error: Database is uninitialized and superuser password is not specified.
       You must specify POSTGRES_PASSWORD to a non-empty value for the
       superuser. For example, "-e POSTGRES_PASSWORD=password" on "docker run".

       You may also use "POSTGRES_HOST_AUTH_METHOD=trust" to allow all
       connections without a password. This is *not* recommended.
EOE
      exit 1
    fi
    note "initializing the database in $PGDATA (user $POSTGRES_USER, database $POSTGRES_DB)"
    args=(--username="$POSTGRES_USER" --auth-local=trust --auth-host="$auth")
    if [ -n "${POSTGRES_INITDB_WALDIR:-}" ]; then args+=(--waldir="$POSTGRES_INITDB_WALDIR"); fi
    extra=()
    eval 'extra=('"$POSTGRES_INITDB_ARGS"')'
    if [ -n "$POSTGRES_PASSWORD" ]; then
      initdb "${args[@]}" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") "${extra[@]}"
    else
      initdb "${args[@]}" "${extra[@]}"
    fi
    printf '\n# every address, with a password (slipway-local/postgresql)\nhost all all all %s\n' "$auth" >>"$PGDATA/pg_hba.conf"

    # a server on the Unix socket only: nobody logs in over TCP before the database is ready
    pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p 5432" -w -s start
    psql=(psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --no-password)
    if [ "$POSTGRES_DB" != postgres ]; then
      "${psql[@]}" --quiet --dbname postgres --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db" ;'
    fi
    export PGPASSWORD=$POSTGRES_PASSWORD
    for f in /docker-entrypoint-initdb.d/*; do
      case $f in
        *.sh)
          if [ -x "$f" ]; then
            note "running $f"
            "$f"
          else
            note "sourcing $f"
            # shellcheck source=/dev/null
            . "$f"
          fi
          ;;
        *.sql) note "running $f"; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
        *.sql.gz) note "running $f"; gunzip -c "$f" | "${psql[@]}" --dbname "$POSTGRES_DB" ;;
        *) if [ -e "$f" ]; then note "ignoring $f"; fi ;;
      esac
    done
    unset PGPASSWORD
    pg_ctl -D "$PGDATA" -m fast -w -s stop
    note "PostgreSQL init process complete; ready for start up"
  fi
fi

exec "$@"
ENTRYPOINT
}

write_mysql_entrypoint() {
  cat >"$1" <<'ENTRYPOINT'
#!/bin/bash
# slipway-local/mysql: the official mariadb (and mysql) image's contract on Debian's MariaDB 10.11.
# Reads MARIADB_ROOT_PASSWORD or MARIADB_ALLOW_EMPTY_ROOT_PASSWORD or MARIADB_RANDOM_ROOT_PASSWORD
# (one is required), MARIADB_ROOT_HOST (%), MARIADB_DATABASE, MARIADB_USER, MARIADB_PASSWORD,
# MARIADB_INITDB_SKIP_TZINFO, each also spelt MYSQL_* (MYSQL_ALLOW_EMPTY_PASSWORD) and as *_FILE,
# and runs /docker-entrypoint-initdb.d/*.sh|*.sql|*.sql.gz once, on the first start with an empty
# /var/lib/mysql.
set -Eeo pipefail

note() { printf '%s [entrypoint] %s\n' "$(date -u '+%F %T UTC')" "$*" >&2; }

# MARIADB_NAME [MYSQL_NAME]: MARIADB_NAME, MYSQL_NAME, or the content of a file one of their *_FILE names
env_of() {
  local name value=
  for name in "$1" "${2:-MYSQL_${1#MARIADB_}}"; do
    if [ -n "${!name:-}" ]; then value=${!name}; break; fi
    local file="${name}_FILE"
    if [ -n "${!file:-}" ]; then value=$(<"${!file}"); break; fi
  done
  printf '%s' "$value"
}

# a string literal's inside ('...') and an identifier's (`...`)
sql_string() { local s=${1//\\/\\\\}; s=${s//$'\n'/\\n}; printf '%s' "${s//\'/\\\'}"; }
sql_name() { printf '%s' "${1//\`/\`\`}"; }

# `mariadbd --version` and the like only print: no initialization for them
wants_help() {
  local arg
  for arg; do case $arg in -'?' | --help | --print-defaults | -V | --version) return 0 ;; esac; done
  return 1
}

if [ "${1:0:1}" = '-' ]; then set -- mariadbd "$@"; fi

if { [ "$1" = mariadbd ] || [ "$1" = mysqld ]; } && ! wants_help "$@"; then
  datadir=/var/lib/mysql
  socket=/run/mysqld/mysqld.sock
  for arg in "$@"; do
    case $arg in --datadir=*) datadir=${arg#--datadir=} ;; --socket=*) socket=${arg#--socket=} ;; esac
  done
  if [ "$(id -u)" = 0 ]; then
    # a fresh named volume is root's: make it the mysql user's, then run as mysql
    mkdir -p "$datadir" /run/mysqld
    find "$datadir" /run/mysqld \! -user mysql -exec chown mysql:mysql '{}' +
    export HOME=/var/lib/mysql
    exec setpriv --reuid=mysql --regid=mysql --init-groups -- "${BASH_SOURCE[0]}" "$@"
  fi

  if [ -d "$datadir/mysql" ]; then
    note "MariaDB data directory $datadir holds a database; skipping initialization"
  else
    root_password=$(env_of MARIADB_ROOT_PASSWORD)
    allow_empty=$(env_of MARIADB_ALLOW_EMPTY_ROOT_PASSWORD MYSQL_ALLOW_EMPTY_PASSWORD)
    random_root=$(env_of MARIADB_RANDOM_ROOT_PASSWORD)
    root_host=$(env_of MARIADB_ROOT_HOST)
    root_host=${root_host:-%}
    database=$(env_of MARIADB_DATABASE)
    user=$(env_of MARIADB_USER)
    password=$(env_of MARIADB_PASSWORD)
    skip_tzinfo=$(env_of MARIADB_INITDB_SKIP_TZINFO)
    if [ -z "$root_password" ] && [ -z "$allow_empty" ] && [ -z "$random_root" ]; then
      note "Database is uninitialized and password option is not specified"
      note "You need to specify one of MARIADB_ROOT_PASSWORD, MARIADB_ALLOW_EMPTY_ROOT_PASSWORD and MARIADB_RANDOM_ROOT_PASSWORD (or their MYSQL_* spellings)"
      exit 1
    fi
    if [ -n "$user" ] && [ -z "$password" ]; then note "MARIADB_USER is set without MARIADB_PASSWORD"; exit 1; fi
    if [ "$user" = root ]; then note "MARIADB_USER=root is not allowed: use MARIADB_ROOT_PASSWORD for root"; exit 1; fi
    if [ -n "$random_root" ]; then
      root_password=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
      echo "GENERATED ROOT PASSWORD: $root_password"
    fi

    note "initializing the database in $datadir"
    mariadb-install-db --datadir="$datadir" --rpm --auth-root-authentication-method=normal \
      --skip-test-db --skip-name-resolve --old-mode='UTF8_IS_UTF8MB3' \
      --default-time-zone=SYSTEM --enforce-storage-engine= --skip-log-bin --expire-logs-days=0 \
      --loose-innodb_buffer_pool_load_at_startup=0 --loose-innodb_buffer_pool_dump_at_shutdown=0 \
      "${@:2}" >/dev/null

    # a server on the Unix socket only: nobody logs in over TCP before the database is ready
    "$@" --skip-networking --default-time-zone=SYSTEM --socket="$socket" --loose-wsrep_on=OFF \
      --expire-logs-days=0 --skip-slave-start --loose-innodb_buffer_pool_load_at_startup=0 \
      --loose-innodb_buffer_pool_dump_at_shutdown=0 &
    pid=$!
    sql=(mariadb --protocol=socket --socket="$socket" -uroot -hlocalhost --batch --skip-column-names)
    for _ in $(seq 300); do
      if "${sql[@]}" --database=mysql -e 'SELECT 1' >/dev/null 2>&1; then break; fi
      kill -0 "$pid" 2>/dev/null || { note "the temporary server exited"; exit 1; }
      sleep 0.1
    done
    "${sql[@]}" --database=mysql -e 'SELECT 1' >/dev/null

    if [ -z "$skip_tzinfo" ]; then
      mariadb-tzinfo-to-sql --skip-write-binlog /usr/share/zoneinfo 2>/dev/null | "${sql[@]}" --database=mysql
    fi

    pw=$(sql_string "$root_password")
    root_sql="SET PASSWORD FOR 'root'@'localhost' = PASSWORD('$pw');"
    if [ "$root_host" != localhost ]; then
      root_sql+=" CREATE USER 'root'@'$(sql_string "$root_host")' IDENTIFIED BY '$pw';"
      root_sql+=" GRANT ALL ON *.* TO 'root'@'$(sql_string "$root_host")' WITH GRANT OPTION;"
      root_sql+=" GRANT PROXY ON ''@'%' TO 'root'@'$(sql_string "$root_host")' WITH GRANT OPTION;"
    fi
    db_sql=
    if [ -n "$database" ]; then db_sql="CREATE DATABASE IF NOT EXISTS \`$(sql_name "$database")\`;"; fi
    user_sql=
    if [ -n "$user" ]; then
      user_sql="CREATE USER '$(sql_string "$user")'@'%' IDENTIFIED BY '$(sql_string "$password")';"
      if [ -n "$database" ]; then user_sql+=" GRANT ALL ON \`$(sql_name "$database")\`.* TO '$(sql_string "$user")'@'%';"; fi
    fi
    "${sql[@]}" --database=mysql <<EOSQL
SET @@SESSION.SQL_LOG_BIN = 0;
SET @@SESSION.SQL_MODE = REPLACE(@@SESSION.SQL_MODE, 'NO_BACKSLASH_ESCAPES', '');
DROP USER IF EXISTS root@'127.0.0.1', root@'::1', ''@'localhost';
EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS root@\'', @@hostname, '\', \'\'@\'', @@hostname, '\'');
$root_sql
$db_sql
$user_sql
EOSQL

    if compgen -G '/docker-entrypoint-initdb.d/*' >/dev/null; then
      # root with its password, on the socket (a function: a <(...) lasts one command)
      client() {
        mariadb --defaults-extra-file=<(printf '[client]\npassword="%s"\n' "$(printf '%s' "$root_password" | sed 's/[\\"]/\\&/g')") \
          --protocol=socket --socket="$socket" -uroot -hlocalhost "$@"
      }
      for f in /docker-entrypoint-initdb.d/*; do
        case $f in
          *.sh)
            if [ -x "$f" ]; then
              note "running $f"
              "$f"
            else
              note "sourcing $f"
              # shellcheck source=/dev/null
              . "$f"
            fi
            ;;
          *.sql) note "running $f"; client ${database:+--database="$database"} <"$f" ;;
          *.sql.gz) note "running $f"; gunzip -c "$f" | client ${database:+--database="$database"} ;;
          *) note "ignoring $f" ;;
        esac
      done
    fi

    kill -TERM "$pid"
    wait "$pid"
    note "MariaDB init process done; ready for start up"
  fi
fi

exec "$@"
ENTRYPOINT
}

write_redis_entrypoint() {
  cat >"$1" <<'ENTRYPOINT'
#!/bin/bash
# slipway-local/redis: the official redis image's contract on Debian's Redis 7.0: the command is
# `redis-server [CONFIG-FILE] [--option value ...]` (e.g. `redis-server --requirepass PW
# --appendonly yes`), data in /data. Without a config file the server listens on every
# interface with protected mode off, like the official image; the user's options come last and win.
set -e

if [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then set -- redis-server "$@"; fi

if [ "$1" = redis-server ]; then
  shift
  case ${1:-} in
    -v | --version | -h | --help | --test-memory | --check-system) ;;
    '' | -*) set -- --bind '* -::*' --protected-mode no --dir /data "$@" ;;
  esac
  set -- redis-server "$@"
  if [ "$(id -u)" = 0 ]; then
    # a fresh named volume is root's: make it the redis user's, then run as redis
    mkdir -p /data
    find /data \! -user redis -exec chown redis:redis '{}' +
    umask 0077
    export HOME=/data
    exec setpriv --reuid=redis --regid=redis --init-groups -- "$@"
  fi
fi

exec "$@"
ENTRYPOINT
}

# --- one image ----------------------------------------------------------------------------------

# shellcheck disable=SC2016 # dpkg-query's own ${Version}
package_version() { in_root dpkg-query -W -f='${Version}' "$1"; }
stage() { echo "== $* (at $((SECONDS - started)) s)"; }
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C DEBIAN_FRONTEND=noninteractive "$@"; }

# The Debian base the images share: debootstrap minbase, then bookworm-updates and
# bookworm-security. Measured on 2 cores: a debootstrap takes 60-100 s whatever it includes, so
# one base copied per image (all three: ~110 s) beats `debootstrap --include=<server>` per image
# (~300 s, one after the other or side by side).
build_base() {
  local started=$SECONDS
  root="$workdir/base"
  stage "debootstrap --variant=minbase $suite"
  debootstrap --variant=minbase "$suite" "$root" "$mirror"

  stage "updates and security updates"
  printf '%s\n' "deb $mirror $suite main" "deb $mirror $suite-updates main" "deb $security_mirror $suite-security main" >"$root/etc/apt/sources.list"
  printf '#!/bin/sh\n# no service starts while building the image\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 0755 "$root/usr/sbin/policy-rc.d"
  # what Debian's slim images keep out of every later install (here and in the containers)
  cat >"$root/etc/dpkg/dpkg.cfg.d/slipway-slim" <<'DPKG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
DPKG
  in_root apt-get update -qq -o Acquire::Languages=none
  in_root apt-get upgrade -y -qq -o Dpkg::Options::=--force-confold -o Dpkg::Options::=--force-unsafe-io
  stage "done"
  echo "ensure-db-images: Debian $suite base (debootstrap minbase + updates) ready in $((SECONDS - started)) s" >&3
}

build() {
  local kind=$1 started=$SECONDS version packages=()
  local dir="$workdir/$kind"
  root="$dir/root"
  mkdir -p -- "$dir"
  stage "copy of the base"
  cp -ax -- "$workdir/base" "$root"
  case $kind in
    postgresql)
      packages=(postgresql-15 locales)
      # the package's own cluster (pg_createcluster main) is not used: the entrypoint runs initdb in PGDATA
      mkdir -p "$root/etc/postgresql-common/createcluster.d"
      echo 'create_main_cluster = false' >"$root/etc/postgresql-common/createcluster.d/slipway.conf"
      # no LLVM JIT (libLLVM, z3 and the bitcode are 150 MB, half the image): without llvmjit.so
      # PostgreSQL runs every query interpreted, as with jit = off
      cat >"$root/etc/dpkg/dpkg.cfg.d/slipway-nojit" <<'DPKG'
path-exclude /usr/lib/postgresql/*/lib/llvmjit*
path-exclude /usr/lib/postgresql/*/lib/bitcode/*
path-exclude /usr/lib/x86_64-linux-gnu/libLLVM-*
path-exclude /usr/lib/x86_64-linux-gnu/libz3.so*
DPKG
      ;;
    # the -core packages: the server and the `mariadb` client, without galera, perl, rsync and socat
    mysql) packages=(mariadb-server-core mariadb-client-core tzdata) ;;
    redis) packages=(redis-server) ;;
  esac
  stage "apt-get install ${packages[*]}"
  in_root apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-unsafe-io "${packages[@]}"

  local entrypoint="$root/usr/local/bin/docker-entrypoint.sh"
  local changes=()
  stage "$kind"
  case $kind in
    postgresql)
      rm -rf -- "$root/var/lib/postgresql/15" "$root/etc/postgresql/15" "$root/var/log/postgresql/"*
      if [ -e "$root/usr/lib/postgresql/15/lib/llvmjit.so" ]; then echo "llvmjit.so was installed" >&2; exit 1; fi
      # the official image's locale: en_US.UTF-8
      in_root localedef -i en_US -c -f UTF-8 -A /usr/share/locale/locale.alias en_US.UTF-8
      # like the official image: every address (the pg_hba line comes from the entrypoint)
      sed -i "s/^#\{0,1\}listen_addresses = 'localhost'/listen_addresses = '*'/" "$root/usr/share/postgresql/15/postgresql.conf.sample"
      grep -q "^listen_addresses = '\*'" "$root/usr/share/postgresql/15/postgresql.conf.sample"
      install -d -o "$(in_root id -u postgres)" -g "$(in_root id -g postgres)" -m 0700 "$root/var/lib/postgresql/data"
      install -d -o "$(in_root id -u postgres)" -g "$(in_root id -g postgres)" -m 3777 "$root/run/postgresql"
      install -d -m 0755 "$root/docker-entrypoint-initdb.d"
      write_postgresql_entrypoint "$entrypoint"
      version=$(package_version postgresql-15)
      changes=(
        --change 'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
        --change 'ENV LANG=en_US.utf8' --change 'ENV PG_MAJOR=15' --change 'ENV PGDATA=/var/lib/postgresql/data'
        --change 'EXPOSE 5432' --change 'CMD ["postgres"]'
      )
      ;;
    mysql)
      in_root sh -c 'getent group mysql >/dev/null || groupadd --system mysql; getent passwd mysql >/dev/null || useradd --system --gid mysql --home-dir /var/lib/mysql --no-create-home --shell /usr/sbin/nologin --comment "MariaDB Server" mysql'
      install -d -o "$(in_root id -u mysql)" -g "$(in_root id -g mysql)" -m 0755 "$root/var/lib/mysql" "$root/run/mysqld"
      # mariadb-dump, mariadb-admin and mariadb-tzinfo-to-sql (the entrypoint loads the time zones
      # like the official image) from mariadb-client, whose perl scripts the image does without
      in_root sh -c 'cd /tmp && apt-get download -qq mariadb-client'
      local deb
      deb=$(echo "$root"/tmp/mariadb-client_*.deb)
      dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$root/usr/local/bin" --strip-components=3 ./usr/bin/mariadb-dump ./usr/bin/mariadb-admin ./usr/bin/mariadb-tzinfo-to-sql
      rm -f -- "$deb"
      ln -sf mariadb-dump "$root/usr/local/bin/mysqldump"
      ln -sf mariadb-admin "$root/usr/local/bin/mysqladmin"
      in_root mariadb-dump --version >/dev/null
      cat >"$root/etc/mysql/mariadb.conf.d/50-server.cnf" <<'CNF'
# slipway-local/mysql, like the official image: every address, no DNS, utf8mb4
[mariadbd]
datadir = /var/lib/mysql
socket = /run/mysqld/mysqld.sock
pid-file = /run/mysqld/mysqld.pid
skip-name-resolve
host-cache-size = 0
character-set-server = utf8mb4
collation-server = utf8mb4_general_ci

[client]
socket = /run/mysqld/mysqld.sock
default-character-set = utf8mb4
CNF
      install -d -m 0755 "$root/docker-entrypoint-initdb.d"
      write_mysql_entrypoint "$entrypoint"
      version=$(package_version mariadb-server-core)
      changes=(
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
        --change 'ENV LANG=C.UTF-8' --change 'EXPOSE 3306' --change 'CMD ["mariadbd"]'
      )
      ;;
    redis)
      install -d -o "$(in_root id -u redis)" -g "$(in_root id -g redis)" -m 0755 "$root/data"
      write_redis_entrypoint "$entrypoint"
      version=$(package_version redis-server)
      changes=(
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
        --change 'WORKDIR /data' --change 'EXPOSE 6379' --change 'CMD ["redis-server"]'
      )
      ;;
  esac
  chmod 0755 "$entrypoint"
  bash -n "$entrypoint"

  stage "slimming"
  rm -f -- "$root/usr/sbin/policy-rc.d"
  in_root apt-get clean
  rm -rf -- "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/debconf/*-old \
    "$root"/var/lib/dpkg/*-old "$root"/var/cache/ldconfig/aux-cache "$root"/usr/share/man/* \
    "$root"/usr/share/info/* "$root"/usr/share/locale/* "$root"/usr/share/i18n "$root"/usr/share/lintian \
    "$root"/usr/share/linda "$root"/tmp/* "$root"/var/tmp/* "$root"/etc/resolv.conf "$root"/debootstrap
  # docs, but each package's copyright
  find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  find "$root/var/log" -type f -delete
  echo localhost >"$root/etc/hostname"

  stage "docker import"
  local image old import_as
  image=$(image_of "$kind")
  import_as=$image
  # PostgreSQL's image is finished by a `docker build` below: imported under a stage name first
  if [ "$kind" = postgresql ]; then import_as="slipway-local/postgresql:import-$$"; fi
  old=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
  tar --create --file=- --directory="$root" --one-file-system --numeric-owner \
      --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' . |
    docker import \
      --change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
      "${changes[@]}" \
      --change "LABEL slipway.local.recipe=$recipe slipway.local.kind=$kind slipway.local.version=$version" \
      --message "slipway-local $kind: Debian $suite minbase + ${packages[*]} $version (scripts/ensure-db-images.sh)" \
      - "$import_as" >/dev/null
  if [ "$kind" = postgresql ]; then
    # `docker import` cannot set STOPSIGNAL: SIGINT is PostgreSQL's fast shutdown (SIGTERM waits for
    # every client to disconnect), as in the official image; the build adds no layer
    if printf 'FROM %s\nSTOPSIGNAL SIGINT\n' "$import_as" | docker build --quiet --tag "$image" - >/dev/null &&
      [ "$(docker image inspect --format '{{.Config.StopSignal}}' "$image")" = SIGINT ]; then
      docker image rm "$import_as" >/dev/null
    else
      echo "ensure-db-images: docker build could not set STOPSIGNAL SIGINT on $image: \`docker stop\` will wait for clients to disconnect (smart shutdown)" >&3
      docker tag "$import_as" "$image"
      docker image rm "$import_as" >/dev/null
    fi
  fi
  [ "$(recipe_of "$image")" = "$recipe" ]
  if [ -n "$old" ] && [ "$old" != "$(docker image inspect --format '{{.Id}}' "$image")" ]; then
    # still used by a container: it stays, untagged, until that container is removed
    docker image rm "$old" >/dev/null || echo "ensure-db-images: kept the previous $image (${old:7:12}): a container uses it" >&3
  fi
  local size
  size=$(docker image inspect --format '{{.Size}}' "$image")
  echo "ensure-db-images: built $image ($kind $version, $((size / 1000000)) MB) in $((SECONDS - started)) s" >&3
}

# --- all of them ---------------------------------------------------------------------------------

exec 3>&2
failed=()
# in the background even one at a time: errexit holds inside a build only outside `if` and `||`
start_build() {
  set -m # a process group of its own: cleanup can stop all of a build
  if [ "$1" = base ]; then
    ( set -euo pipefail; build_base ) >"$workdir/base.log" 2>&1 &
  else
    ( set -euo pipefail; build "$1" ) >"$workdir/$1.log" 2>&1 &
  fi
  pids+=("$!")
  set +m
}
say "building ${todo[*]} from Debian $suite ($mirror)"
start_build base
if ! wait "${pids[0]}"; then
  say "building the Debian $suite base failed; the end of its log:"
  tail -n 25 "$workdir/base.log" >&2 || true
  exit 1
fi
pids=()
if [ "$parallel" = 1 ]; then
  for kind in "${todo[@]}"; do start_build "$kind"; done
  for i in "${!todo[@]}"; do wait "${pids[$i]}" || failed+=("${todo[$i]}"); done
else
  for kind in "${todo[@]}"; do
    start_build "$kind"
    wait "${pids[-1]}" || failed+=("$kind")
  done
fi
pids=()
for kind in "${failed[@]}"; do
  say "building $(image_of "$kind") failed; the end of its log:"
  tail -n 25 "$workdir/$kind.log" >&2 || true
done
[ ${#failed[@]} -eq 0 ] || exit 1
