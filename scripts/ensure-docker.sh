#!/usr/bin/env bash
# Make sure a Docker Engine answers for the runtime tests (and `make run`): on a fresh Debian
# machine install docker.io (the engine) and busybox-static (the tests' base image is made from
# it: no registry is reachable), start dockerd in the background when no socket answers, and wait
# until `docker version` does. Says what it does on stderr; exits non-zero with the reason when
# it cannot get an engine.
set -euo pipefail

log=${SLIPWAY_DOCKERD_LOG:-/tmp/slipway-dockerd.log}
wait_sec=${SLIPWAY_DOCKERD_WAIT:-60}

say() { echo "ensure-docker: $*" >&2; }
fail() { say "$*"; exit 1; }
answers() { timeout 10 docker version >/dev/null 2>&1; }
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
is_root() { [ "$(id -u)" -eq 0 ]; }

missing=()
if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then missing+=(docker.io); fi
# The dynamically linked `busybox` package does not run inside an empty image: it must be the static one.
if ! installed busybox-static; then missing+=(busybox-static); fi

if [ ${#missing[@]} -gt 0 ]; then
  if ! is_root || ! command -v apt-get >/dev/null 2>&1; then
    fail "missing ${missing[*]}: install them (Debian/Ubuntu: sudo apt-get install ${missing[*]}) or run this script as root on Debian/Ubuntu."
  fi
  say "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq "${missing[@]}" >&2 || fail "apt-get could not install ${missing[*]}."
fi

if answers; then exit 0; fi

if [ -n "${DOCKER_HOST:-}" ] && [ "${DOCKER_HOST}" != "unix:///var/run/docker.sock" ]; then
  fail "DOCKER_HOST=${DOCKER_HOST} does not answer \`docker version\`; start that engine, or unset DOCKER_HOST to use a local dockerd."
fi

# A dockerd that is still starting gets its chance before a second one is started.
if ! pgrep -x dockerd >/dev/null 2>&1; then
  is_root || fail "no Docker Engine answers and starting dockerd needs root: run \`sudo dockerd\` (or start the docker service) first."
  say "starting dockerd in the background (log: $log)"
  # setsid: dockerd outlives this script and the job that ran it
  setsid dockerd >>"$log" 2>&1 </dev/null &
fi

for _ in $(seq 1 "$wait_sec"); do
  if answers; then
    say "Docker Engine $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})' 2>/dev/null) answers"
    exit 0
  fi
  sleep 1
done

say "no Docker Engine answered within ${wait_sec} s; the last lines of $log:"
tail -n 20 "$log" >&2 2>/dev/null || true
exit 1
