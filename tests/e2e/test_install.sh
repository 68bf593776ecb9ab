#!/usr/bin/env bash
# `make install` (scripts/install.sh) into a temporary prefix: a program
# compiled with `pkg-config --cflags --libs caliper` links the installed
# library and runs; the engine library links through caliper-engine.pc; the
# measurement library holds no engine or server code; every subcommand has
# its man page; only the public headers are installed, each compiles alone;
# a staged install (DESTDIR, own LIBDIR/BINDIR/MANDIR) puts every file under
# the stage, names the final paths in the .pc files and runs nothing it
# installs.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
: "${BUILD:?BUILD must point at the build directory}"
CC=${CC:-cc}
P="$E2E_TMP/prefix"

if PREFIX="$P" bash "$ROOT/scripts/install.sh" "$BUILD" >"$E2E_TMP/install.log" 2>&1; then
  ok "install into a temporary prefix"
else
  not_ok "install into a temporary prefix: $(tail -3 "$E2E_TMP/install.log")"; finish
fi
for f in bin/caliper lib/libcaliper.a lib/libcaliper-engine.a lib/pkgconfig/caliper.pc \
         lib/pkgconfig/caliper-engine.pc include/caliper/units.h include/caliper/store.h \
         include/caliper/engine.h; do
  [ -f "$P/$f" ] || not_ok "installed $f"
done
check "installed caliper runs" "$P/bin/caliper" --version

# The public API only: the test hook (allocation-failure injection) stays
# inside the tree, and every installed header compiles on its own.
[ ! -e "$P/include/caliper/alloc.h" ] && ok "the allocation test hook is not installed" ||
  not_ok "include/caliper/alloc.h was installed"
bad=
for h in "$P"/include/caliper/*.h; do
  printf '#include <caliper/%s>\n' "${h##*/}" >"$E2E_TMP/h.c"
  $CC -std=c11 -fsyntax-only -I"$P/include" $(pkg-config --cflags jansson sqlite3 libcurl 2>/dev/null) \
      "$E2E_TMP/h.c" 2>"$E2E_TMP/h.log" || bad="$bad ${h##*/}"
done
[ -z "$bad" ] && ok "each of $(ls "$P"/include/caliper/*.h | wc -l) installed headers compiles alone" ||
  not_ok "installed headers that do not compile alone:$bad ($(head -2 "$E2E_TMP/h.log"))"

# A staged install with the directories a distribution uses; the build's
# caliper replaced by a copy that leaves a mark when run.
S="$E2E_TMP/stage"; FB="$E2E_TMP/fakebuild"
mkdir -p "$FB"
cp -r "$BUILD/man" "$FB/man"
cp "$BUILD/libcaliper.a" "$BUILD/libcaliper-engine.a" "$FB/"
printf '#!/bin/sh\ntouch "%s/ran"\n' "$E2E_TMP" >"$FB/caliper"; chmod +x "$FB/caliper"
if DESTDIR="$S" PREFIX=/usr LIBDIR=/usr/lib/x86_64-linux-gnu MANDIR=/usr/share/man \
     bash "$ROOT/scripts/install.sh" "$FB" >"$E2E_TMP/stage.log" 2>&1 &&
   [ -f "$S/usr/bin/caliper" ] && [ -f "$S/usr/lib/x86_64-linux-gnu/libcaliper.a" ] &&
   [ -f "$S/usr/lib/x86_64-linux-gnu/pkgconfig/caliper.pc" ] &&
   [ -f "$S/usr/share/man/man1/caliper.1" ] && [ -f "$S/usr/include/caliper/units.h" ]; then
  ok "a staged install puts BINDIR, LIBDIR, INCLUDEDIR, MANDIR under DESTDIR"
else
  not_ok "staged install: $(tail -3 "$E2E_TMP/stage.log"; find "$S" -maxdepth 4 | head -20)"
fi
pc=$(cat "$S/usr/lib/x86_64-linux-gnu/pkgconfig/caliper.pc" 2>/dev/null)
if grep -qx 'libdir=/usr/lib/x86_64-linux-gnu' <<<"$pc" && grep -qx 'includedir=/usr/include' <<<"$pc" &&
   ! grep -q "$S" <<<"$pc"; then
  ok "the staged caliper.pc names LIBDIR and INCLUDEDIR, not the stage"
else
  not_ok "staged caliper.pc: $(grep dir= <<<"$pc")"
fi
[ ! -e "$E2E_TMP/ran" ] && ok "install runs nothing it installs" || not_ok "install ran the binary"

export PKG_CONFIG_PATH="$P/lib/pkgconfig"
check "pkg-config knows caliper and caliper-engine" pkg-config --exists caliper caliper-engine
pc_prefix=$(pkg-config --variable=prefix caliper)
[ "$pc_prefix" = "$P" ] && ok "caliper.pc names the prefix" || not_ok "caliper.pc prefix is '$pc_prefix', not '$P'"

cat >"$E2E_TMP/use.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <caliper/error.h>
#include <caliper/stats.h>
#include <caliper/store.h>
#include <caliper/units.h>
int main(int argc, char **argv)
{
    double v = 0;
    if (cal_unit_parse(CAL_U_TIME, "250ms", NULL, &v) != CAL_OK || v != 0.25) return 1;
    char buf[32];
    printf("%s\n", cal_unit_format(CAL_U_BYTES, 2.7e9, 3, buf, sizeof buf));
    double x[] = {3, 1, 2};
    printf("median %g\n", cal_stats_median(x, 3));
    printf("%s\n", cal_strerror(CAL_EINVAL));
    cal_store *st = NULL;
    if (argc < 2 || cal_store_open(argv[1], &st) != CAL_OK) return 2;
    printf("schema %d\n", cal_store_schema_version(st));
    cal_store_close(&st);
    return st == NULL ? 0 : 3;
}
C
# shellcheck disable=SC2046
if $CC -std=c11 -o "$E2E_TMP/use" "$E2E_TMP/use.c" $(pkg-config --cflags --libs caliper) \
     >"$E2E_TMP/cc.log" 2>&1; then
  ok "a program builds with pkg-config --cflags --libs caliper"
  if "$E2E_TMP/use" "$E2E_TMP/x.db" >"$E2E_TMP/use.out" 2>&1 &&
     grep -qx '2.70 GB' "$E2E_TMP/use.out" && grep -qx 'median 2' "$E2E_TMP/use.out" &&
     grep -qE '^schema [1-9]' "$E2E_TMP/use.out" && [ -s "$E2E_TMP/x.db" ]; then
    ok "the installed library parses, formats, computes and opens a store"
  else
    not_ok "the program linked against the installed library: $(cat "$E2E_TMP/use.out")"
  fi
else
  not_ok "a program builds with pkg-config caliper: $(head -5 "$E2E_TMP/cc.log")"
fi

cat >"$E2E_TMP/eng.c" <<'C'
#include <stdio.h>
#include <caliper/engine.h>
#include <caliper/error.h>
int main(void)
{
    cal_model_config c;
    if (cal_model_preset("tiny", &c) != CAL_OK) return 1;
    printf("params %lld\n", (long long)cal_model_n_params(&c));
    return cal_model_n_params(&c) > 0 ? 0 : 1;
}
C
# The engine is not in libcaliper: caliper alone must not resolve it.
if $CC -std=c11 -o "$E2E_TMP/eng0" "$E2E_TMP/eng.c" $(pkg-config --cflags --libs caliper) \
     >/dev/null 2>&1; then
  not_ok "an engine program links against libcaliper alone (the engine is bundled)"
else
  ok "the engine is not in libcaliper"
fi
if $CC -std=c11 -o "$E2E_TMP/eng" "$E2E_TMP/eng.c" \
     $(pkg-config --cflags --libs caliper-engine caliper) >"$E2E_TMP/cce.log" 2>&1 &&
   "$E2E_TMP/eng" | grep -qE '^params [1-9]'; then
  ok "an engine program builds with pkg-config caliper-engine and runs"
else
  not_ok "pkg-config caliper-engine: $(head -5 "$E2E_TMP/cce.log")"
fi

# No engine or server symbol defined in libcaliper.a.
defs() { nm --defined-only "$@" 2>/dev/null | awk '$2 ~ /^[TDRBC]$/ {print $3}' | sort -u; }
defs "$P/lib/libcaliper.a" >"$E2E_TMP/lib.syms"
defs "$P/lib/libcaliper-engine.a" >"$E2E_TMP/eng.syms"
if [ -d "$BUILD/obj/server" ]; then defs "$BUILD"/obj/server/*.o >"$E2E_TMP/srv.syms"; else : >"$E2E_TMP/srv.syms"; fi
[ -s "$E2E_TMP/lib.syms" ] && [ -s "$E2E_TMP/eng.syms" ] && [ -s "$E2E_TMP/srv.syms" ] ||
  not_ok "symbol lists are empty (nm missing?)"
both=$(cat "$E2E_TMP/eng.syms" "$E2E_TMP/srv.syms" | sort -u | comm -12 "$E2E_TMP/lib.syms" -)
[ -z "$both" ] && ok "libcaliper.a defines no engine or server symbol" ||
  not_ok "libcaliper.a defines engine/server symbols: $(echo $both | head -c 300)"
grep -q '^cal_unit_parse$' "$E2E_TMP/lib.syms" && grep -q '^cal_engine_open$' "$E2E_TMP/eng.syms" &&
  ok "nm sees the libraries' own symbols" || not_ok "nm does not see cal_unit_parse / cal_engine_open"

# One man page per subcommand, made from its --help.
cmds=$("$CALIPER" --help | awk '/^commands:/{on=1; next} on && /^  [a-z]/{print $1}')
missing=
[ -s "$P/share/man/man1/caliper.1" ] || missing="caliper.1"
for c in $cmds; do
  m="$P/share/man/man1/caliper-$c.1"
  if [ -s "$m" ] && grep -q "^\.TH CALIPER-$(echo "$c" | tr a-z A-Z) 1" "$m" &&
     grep -q "caliper $c" "$m"; then :; else missing="$missing caliper-$c.1"; fi
done
[ -n "$cmds" ] && [ -z "$missing" ] && ok "a man page for each of $(echo $cmds | wc -w) commands" ||
  not_ok "man pages missing or empty: $missing"
if command -v man >/dev/null 2>&1; then
  man -l "$P/share/man/man1/caliper-run.1" 2>/dev/null | grep -q -- '--' &&
    ok "man renders caliper-run.1" || not_ok "man -l caliper-run.1 renders nothing"
fi
finish
