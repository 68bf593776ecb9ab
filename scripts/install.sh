#!/usr/bin/env bash
# Installs what `make` built in BUILD: the caliper binary (and caliper-mpi
# where it was built), libcaliper.a and libcaliper-engine.a, the public
# headers (<caliper/*.h>, the engine's as <caliper/engine.h>), caliper.pc
# and caliper-engine.pc, and the man pages `make` generated in BUILD/man.
# It runs nothing it installs. `make install` calls it.
# Usage: scripts/install.sh BUILD
# Where (environment, as the Makefile's variables): DESTDIR (a staging root
# prefixed to every path, not written into any file), PREFIX (/usr/local),
# BINDIR, LIBDIR, INCLUDEDIR, MANDIR, PKGCONFIGDIR (under PREFIX by default;
# the .pc files name LIBDIR and INCLUDEDIR), VERSION (default: ./VERSION).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: scripts/install.sh BUILD (directories from the environment)" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
build=$1
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr/local}
BINDIR=${BINDIR:-$PREFIX/bin}
LIBDIR=${LIBDIR:-$PREFIX/lib}
INCLUDEDIR=${INCLUDEDIR:-$PREFIX/include}
MANDIR=${MANDIR:-$PREFIX/share/man}
PKGCONFIGDIR=${PKGCONFIGDIR:-$LIBDIR/pkgconfig}
VERSION=${VERSION:-$(cat "$root/VERSION")}
for f in caliper libcaliper.a libcaliper-engine.a man/caliper.1; do
  [ -f "$build/$f" ] || { echo "install: $build/$f is missing: run 'make' first" >&2; exit 1; }
done
link_flags=$(cat "$build/link-flags" 2>/dev/null || true)
d=$DESTDIR

install -d "$d$BINDIR" "$d$LIBDIR" "$d$PKGCONFIGDIR" "$d$INCLUDEDIR/caliper" "$d$MANDIR/man1"
install -m 755 "$build/caliper" "$d$BINDIR/caliper"
# beside it: `caliper run --mpi` execs it (built with WITH_MPI=auto|yes)
[ ! -x "$build/caliper-mpi" ] || install -m 755 "$build/caliper-mpi" "$d$BINDIR/caliper-mpi"
install -m 644 "$build/libcaliper.a" "$build/libcaliper-engine.a" "$d$LIBDIR/"
# include/caliper/ holds the public API and nothing else
install -m 644 "$root"/include/caliper/*.h "$d$INCLUDEDIR/caliper/"
install -m 644 "$root/engine/engine.h" "$d$INCLUDEDIR/caliper/engine.h"
for pc in caliper caliper-engine; do
  sed -e "s|@PREFIX@|$PREFIX|g" -e "s|@LIBDIR@|$LIBDIR|g" -e "s|@INCLUDEDIR@|$INCLUDEDIR|g" \
      -e "s|@VERSION@|$VERSION|g" -e "s|@LINK_FLAGS@|$link_flags|g" \
    "$root/pkg/$pc.pc.in" >"$d$PKGCONFIGDIR/$pc.pc"
  chmod 644 "$d$PKGCONFIGDIR/$pc.pc"
done
install -m 644 "$build"/man/*.1 "$d$MANDIR/man1/"
echo "installed caliper $VERSION in ${d}${PREFIX}"
