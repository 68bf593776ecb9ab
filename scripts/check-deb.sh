#!/usr/bin/env bash
# The Debian packages, built and used as a user would: from `make dist`'s
# tarball (as caliper_VERSION.orig.tar.gz) with dpkg-buildpackage -us -uc -b,
# checked by lintian (any error fails; warnings are printed), installed with
# apt-get, then `caliper serve` + `caliper run` from /usr/bin
# (scripts/smoke.sh) and examples/inproc_engine.c built against the
# installed libcaliper-dev with pkg-config alone, and run. The packages are
# removed again at the end. Root (or sudo) for apt-get.
# Usage: scripts/check-deb.sh [OUTDIR]   (OUTDIR keeps the .deb files)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
version=$(cat VERSION)
make --no-print-directory dist
t=$(mktemp -d /tmp/caliper-deb.XXXXXX)
installed=0
cleanup() {
  [ $installed = 0 ] || $SUDO apt-get remove -y -qq caliper libcaliper-dev >/dev/null 2>&1 || true
  rm -rf "$t"
}
trap cleanup EXIT
cp "caliper-$version.tar.gz" "$t/caliper_$version.orig.tar.gz"
tar -xzf "caliper-$version.tar.gz" -C "$t"
(cd "$t/caliper-$version" && dpkg-buildpackage -us -uc -b -j2) >"$t/build.log" 2>&1 ||
  { tail -40 "$t/build.log"; echo "check-deb: dpkg-buildpackage failed"; exit 1; }
debs=$(ls "$t"/caliper_*.deb "$t"/libcaliper-dev_*.deb)
echo "check-deb: built $(echo $debs | xargs -n1 basename | tr '\n' ' ')"
for d in $debs; do dpkg-deb -c "$d" | awk '{print "  " $6}' | grep -v '/$' | head -60; done
# lintian: errors fail, the rest is listed
lintian --fail-on error --tag-display-limit 0 $debs | tee "$t/lintian.txt"
echo "check-deb: lintian: $(grep -c '^E:' "$t/lintian.txt" || true) errors, $(grep -c '^W:' "$t/lintian.txt" || true) warnings"
[ -z "${1:-}" ] || { mkdir -p "$1"; cp $debs "$1/"; }

$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $debs >"$t/apt.log" 2>&1 ||
  { tail -20 "$t/apt.log"; exit 1; }
installed=1
[ -x /usr/bin/caliper ] || { echo "check-deb: /usr/bin/caliper missing"; exit 1; }
man -w caliper-run >/dev/null 2>&1 || { echo "check-deb: man caliper-run not found"; exit 1; }
bash "$root/scripts/smoke.sh" /usr/bin/caliper
# examples/ against the installed -dev package, with pkg-config's own paths
env -u PKG_CONFIG_PATH cc -std=c11 -O2 -o "$t/inproc_engine" examples/inproc_engine.c \
  $(env -u PKG_CONFIG_PATH pkg-config --cflags --libs caliper caliper-engine)
"$t/inproc_engine" "$t/ex.db" 2 >"$t/ex.log" 2>&1 || { tail -5 "$t/ex.log"; exit 1; }
/usr/bin/caliper runs --db "$t/ex.db" | grep -q . || { echo "check-deb: the example stored no run"; exit 1; }
echo "check-deb: examples/inproc_engine.c built with pkg-config caliper caliper-engine and ran"
