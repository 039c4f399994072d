#!/usr/bin/env bash
# Make sure the MariaDB and Redis servers that the shared-provisioner tests use answer on
# loopback (MariaDB on 127.0.0.1:3306 as root without a password, Redis on 127.0.0.1:6379),
# installing and starting Debian's packages on a fresh machine. Prints the lines to add to
# .test-env: SLIPWAY_TEST_MYSQL_URL and SLIPWAY_TEST_REDIS_URL.
set -euo pipefail

missing=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-shared-servers: missing ${missing[*]}; install them (Debian/Ubuntu: apt-get install ${missing[*]}) and run again" >&2
    exit 1
  fi
  echo "ensure-shared-servers: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# --- MariaDB ------------------------------------------------------------------------------------
mysql_ok() { mariadb --connect-timeout=3 -h 127.0.0.1 -P 3306 -u root -e 'select 1' >/dev/null 2>&1; }
if ! mariadb-admin --connect-timeout=2 -h 127.0.0.1 -P 3306 ping >/dev/null 2>&1; then
  echo "ensure-shared-servers: starting MariaDB" >&2
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd >&2
  for _ in $(seq 1 60); do mariadb-admin --connect-timeout=2 -h 127.0.0.1 -P 3306 ping >/dev/null 2>&1 && break; sleep 0.5; done
fi
if ! mysql_ok; then
  # a fresh Debian install lets root in through the socket only: root over TCP from loopback too
  echo "ensure-shared-servers: letting root in from 127.0.0.1 without a password (test machines only)" >&2
  mariadb -u root -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;" >&2
fi
mysql_ok || { echo "ensure-shared-servers: MariaDB does not accept root on 127.0.0.1:3306" >&2; exit 1; }

# --- Redis --------------------------------------------------------------------------------------
if ! redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; then
  echo "ensure-shared-servers: starting Redis" >&2
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log >&2
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG && break; sleep 0.5; done
fi
redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG || { echo "ensure-shared-servers: Redis does not answer on 127.0.0.1:6379" >&2; exit 1; }

echo "SLIPWAY_TEST_MYSQL_URL=mysql://root@127.0.0.1:3306"
echo "SLIPWAY_TEST_REDIS_URL=redis://127.0.0.1:6379"
