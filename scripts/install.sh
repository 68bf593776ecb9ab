#!/usr/bin/env bash
# Installs what `make` built in BUILD: the caliper binary, libcaliper.a and
# libcaliper-engine.a, the public headers (<caliper/*.h>, the engine's as
# <caliper/engine.h>), caliper.pc and caliper-engine.pc, and one man page per
# subcommand generated from its --help text.
# Usage: scripts/install.sh BUILD DEST [PREFIX]
#   DEST: where the files go ($DESTDIR$PREFIX); PREFIX: the path the .pc
#   files name (default DEST). `make install PREFIX=...` calls this.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: scripts/install.sh BUILD DEST [PREFIX]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
build=$1; dest=$2; prefix=${3:-$2}
for f in caliper libcaliper.a libcaliper-engine.a; do
  [ -f "$build/$f" ] || { echo "install: $build/$f is missing: run 'make' first" >&2; exit 1; }
done
version=$("$build/caliper" --version | awk '{print $2}')
link_flags=$(cat "$build/link-flags" 2>/dev/null || true)

install -d "$dest/bin" "$dest/lib/pkgconfig" "$dest/include/caliper" "$dest/share/man/man1"
install -m 755 "$build/caliper" "$dest/bin/caliper"
# beside it: `caliper run --mpi` execs it (built only where mpicc was)
[ ! -x "$build/caliper-mpi" ] || install -m 755 "$build/caliper-mpi" "$dest/bin/caliper-mpi"
install -m 644 "$build/libcaliper.a" "$build/libcaliper-engine.a" "$dest/lib/"
install -m 644 "$root"/include/caliper/*.h "$dest/include/caliper/"
install -m 644 "$root/engine/engine.h" "$dest/include/caliper/engine.h"
for pc in caliper caliper-engine; do
  sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$version|g" -e "s|@LINK_FLAGS@|$link_flags|g" \
    "$root/pkg/$pc.pc.in" >"$dest/lib/pkgconfig/$pc.pc"
  chmod 644 "$dest/lib/pkgconfig/$pc.pc"
done
bash "$root/scripts/gen-man.sh" "$build/caliper" "$build/man"
install -m 644 "$build"/man/*.1 "$dest/share/man/man1/"
echo "installed caliper $version in $dest"
