#!/usr/bin/env bash
# Make sure the Docker Engine has the example app's base image (examples/hello/Dockerfile):
# present already → nothing to do; otherwise pull it (briefly: there may be no registry), and
# failing that build it locally from Debian's static busybox (busybox-static): a root filesystem
# with /bin/busybox and one symlink per applet (sh, httpd, ls, cat, echo …), `docker import`ed
# with a CMD. Says what it does on stderr; exits non-zero with the reason when it cannot.
#
# Usage: scripts/ensure-example-image.sh [IMAGE]   (default busybox:1.36)
set -euo pipefail

image=${1:-busybox:1.36}
busybox=${SLIPWAY_BUSYBOX:-/bin/busybox}
pull_timeout=${SLIPWAY_PULL_TIMEOUT:-20}

say() { echo "ensure-example-image: $*" >&2; }
fail() { say "$*"; exit 1; }

if ! timeout 10 docker version >/dev/null 2>&1; then
  fail "no Docker Engine answers \`docker version\`; run scripts/ensure-docker.sh (make run does) first."
fi

if docker image inspect "$image" >/dev/null 2>&1; then exit 0; fi

say "$image is not on the engine; trying docker pull (at most ${pull_timeout} s)"
if timeout "$pull_timeout" docker pull --quiet "$image" >/dev/null 2>&1 && docker image inspect "$image" >/dev/null 2>&1; then
  say "pulled $image"
  exit 0
fi

say "no registry answered: building $image locally from $busybox (Debian's busybox-static)"
[ -x "$busybox" ] || fail "$busybox is missing: install busybox-static (Debian/Ubuntu: apt-get install busybox-static) and run again."
# The dynamically linked busybox (Debian's `busybox` package) would not run in an image without libc.
linkage=$(ldd "$busybox" 2>&1 || true)
[[ $linkage == *"not a dynamic"* ]] || fail "$busybox is dynamically linked: install busybox-static (it replaces the busybox package) and run again."

root=$(mktemp -d "${TMPDIR:-/tmp}/slipway-busybox-root.XXXXXX")
trap 'rm -rf -- "$root"' EXIT
mkdir -p -- "$root/bin" "$root/etc" "$root/root" "$root/tmp" "$root/www"
chmod 1777 -- "$root/tmp"
cp -- "$busybox" "$root/bin/busybox"
chmod 0755 -- "$root/bin/busybox"
count=0
while IFS= read -r applet; do
  case $applet in
    '' | busybox | */*) continue ;;
  esac
  ln -s busybox "$root/bin/$applet"
  count=$((count + 1))
done < <("$busybox" --list)
[ -e "$root/bin/sh" ] && [ -e "$root/bin/httpd" ] || fail "$busybox has no sh or httpd applet."
printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' >"$root/etc/passwd"
printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' >"$root/etc/group"

tar --create --file=- --directory="$root" --owner=0 --group=0 --numeric-owner . |
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'LABEL slipway.local-base=busybox-static' \
    --change 'CMD ["sh"]' \
    --message "local build of $image from $busybox" \
    - "$image" >/dev/null
docker image inspect "$image" >/dev/null 2>&1 || fail "docker import did not produce $image."
say "built $image locally ($count applets); remove it with: docker image rm $image"
