#!/usr/bin/env bash
# Publish examples/hello as a local Git repository that `slipway serve --git-base-url
# file://<root>` can clone as `examples/hello`: the bare repository <root>/examples/hello.git,
# branch main. Whenever the files of examples/hello differ from what the branch holds, they are
# committed from a temporary working copy and force-pushed (one commit, no history to keep);
# otherwise nothing happens. Git's global and system configuration are not touched.
#
# Usage: scripts/prepare-example.sh [ROOT]   (default: data/git in this checkout)
set -euo pipefail

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
src="$here/examples/hello"
root=${1:-"$here/data/git"}
bare="$root/examples/hello.git"
branch=main

say() { echo "prepare-example: $*" >&2; }
[ -f "$src/Dockerfile" ] || { say "$src/Dockerfile is missing"; exit 1; }
command -v git >/dev/null 2>&1 || { say "git is missing: install it (Debian/Ubuntu: apt-get install git)"; exit 1; }

# Fixed identity and settings for the commits made here, whatever the user's configuration says.
g() {
  git -c user.name=Slipway -c user.email=slipway@localhost -c commit.gpgsign=false \
    -c core.autocrlf=false -c init.defaultBranch="$branch" "$@"
}

if [ ! -d "$bare" ]; then
  mkdir -p -- "$(dirname -- "$bare")"
  g init --quiet --bare -- "$bare"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/slipway-example.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
g init --quiet -- "$work"
# The files as they are on disk (committed or not), without any .git of their own.
tar --create --file=- --directory="$src" --exclude=.git . | tar --extract --file=- --directory="$work"
g -C "$work" add --all
tree=$(g -C "$work" write-tree)
published=$(g --git-dir="$bare" rev-parse --quiet --verify "refs/heads/$branch^{tree}" 2>/dev/null || true)
if [ "$tree" = "$published" ]; then exit 0; fi

g -C "$work" commit --quiet --message "examples/hello as of $(date -u +%Y-%m-%dT%H:%M:%SZ)"
g -C "$work" push --quiet --force -- "$bare" "HEAD:refs/heads/$branch"
say "published examples/hello at $bare (branch $branch, commit $(g -C "$work" rev-parse --short HEAD))"
