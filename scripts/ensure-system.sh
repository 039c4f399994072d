#!/usr/bin/env bash
# Install, in one apt-get run, the Debian packages the tests need that this machine lacks.
# Each entry is "command:package". Without root or apt-get, say exactly what is missing.
set -euo pipefail

# pebble (pebble + pebble-challtestsrv) is the ACME CA of test/medium/acme.test.ts; openssl makes test certificates.
need=(git:git dockerd:docker.io busybox:busybox-static nginx:nginx-light pg_ctlcluster:postgresql pebble:pebble openssl:openssl)
missing=()
for entry in "${need[@]}"; do
  cmd=${entry%%:*}
  pkg=${entry#*:}
  if [ "$cmd" = busybox ]; then
    # busybox-static provides a static /bin/busybox that can be copied into an image.
    linkage=$(ldd /bin/busybox 2>&1 || true)
    [[ $linkage == *"not a dynamic"* ]] && continue
  elif command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ]; then
    continue
  fi
  missing+=("$pkg")
done

[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-system: missing packages: ${missing[*]}; install them (Debian/Ubuntu: apt-get install ${missing[*]}) and run again" >&2
  exit 1
fi
echo "ensure-system: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
