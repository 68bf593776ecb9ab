#!/usr/bin/env bash
# `make dist`'s tarball builds outside git: unpack it in a temporary
# directory (no .git anywhere above it), build, check that --version names
# VERSION and the commit the tarball carries, and run the smoke test
# (scripts/smoke.sh). --full also runs the whole `make test` there.
# Usage: scripts/check-dist.sh [--full]   (from the work tree)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
version=$(cat VERSION)
make --no-print-directory dist
t=$(mktemp -d /tmp/caliper-dist.XXXXXX)
trap 'rm -rf "$t"' EXIT
tar -xzf "caliper-$version.tar.gz" -C "$t"
src=$t/caliper-$version
[ -f "$src/VERSION" ] && [ -f "$src/COMMIT" ] || { echo "check-dist: VERSION or COMMIT missing"; exit 1; }
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  echo "check-dist: $t is inside a git work tree; cannot test a build outside git"; exit 1
fi
make -C "$src" --no-print-directory -j2 all WERROR=1
v=$("$src/build/caliper" --version)
case "$v" in
  "caliper $version (commit $(cat "$src/COMMIT"),"*) echo "check-dist: $v" ;;
  *) echo "check-dist: --version is '$v', expected version $version and commit $(cat "$src/COMMIT")"; exit 1 ;;
esac
bash "$root/scripts/smoke.sh" "$src/build/caliper"
if [ "${1:-}" = --full ]; then
  make -C "$src" --no-print-directory test
fi
echo "check-dist: caliper-$version.tar.gz builds outside git"
