#!/usr/bin/env bash
# The library's structure (scripts/check-layers.py): no circle between the
# files of lib/, no call from a lower layer to a higher one, no source file
# over 1,000 lines, read from the object files the build made. The checker
# itself is proved on objects and nm listings made here: a circle, an arrow
# up and an oversized file each fail it, naming the files; the same shapes
# without the break pass.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CHECK="$ROOT/scripts/check-layers.py"
OBJS="${BUILD:-$ROOT/build}/obj/lib"
T="$E2E_TMP"
NONE="$T/none.allow"; : >"$NONE"
# the checker, quiet: only its exit status counts
layers() { python3 "$CHECK" "$@" >/dev/null 2>&1; }

if out=$(cd "$ROOT" && python3 "$CHECK" --objs "$OBJS" 2>&1); then
  ok "lib/ has no circle, no arrow up and no file over 1,000 lines beyond the listed exceptions"
else
  not_ok "the library's structure: $out"
fi

# Real objects: two files of lib/report that call each other.
mkdir -p "$T/o/lib/report" "$T/o/lib/util"
printf 'int b(void);\nint a(void) { return b() + 1; }\n' >"$T/a.c"
printf 'int a(void);\nint b(void) { return 2; }\nint c(void) { return a(); }\n' >"$T/b.c"
printf 'int d(void) { return 4; }\n' >"$T/d.c"
cc -c "$T/a.c" -o "$T/o/lib/report/a.o" && cc -c "$T/b.c" -o "$T/o/lib/report/b.o" &&
  cc -c "$T/d.c" -o "$T/o/lib/util/d.o" || not_ok "cc builds the synthetic objects"
mkdir -p "$T/src/lib/report" "$T/src/lib/util"
touch "$T/src/lib/report/a.c" "$T/src/lib/report/b.c" "$T/src/lib/util/d.c"
out=$(python3 "$CHECK" --objs "$T/o" --root "$T/src" --allow "$NONE" 2>&1); rc=$?
check "a circle between two objects fails the check (exit 1)" [ "$rc" -eq 1 ]
case "$out" in
  *"circle: lib/report/a.c <-> lib/report/b.c"*) ok "the circle is named file by file" ;;
  *) not_ok "the circle is named file by file: $out" ;;
esac
case "$out" in
  *"lib/report/a.c -> lib/report/b.c: b"*"lib/report/b.c -> lib/report/a.c: a"*)
    ok "each arrow of the circle names the symbol that ties it" ;;
  *) not_ok "each arrow of the circle names the symbol that ties it: $out" ;;
esac
echo 'circle lib/report/a.c lib/report/b.c  # temporary: a test' >"$T/one.allow"
check "a circle listed as a temporary exception passes" \
  layers --objs "$T/o" --root "$T/src" --allow "$T/one.allow"
echo 'circle lib/report/a.c lib/report/b.c  # for ever' >"$T/bad.allow"
python3 "$CHECK" --objs "$T/o" --root "$T/src" --allow "$T/bad.allow" >/dev/null 2>&1; rc=$?
check "an exception that does not say it is temporary is refused (exit 2)" [ "$rc" -eq 2 ]
# Break the circle: b.c no longer calls a; the same objects otherwise pass.
printf 'int b(void) { return 2; }\n' >"$T/b.c"
cc -c "$T/b.c" -o "$T/o/lib/report/b.o"
check "the same objects without the circle pass" \
  layers --objs "$T/o" --root "$T/src" --allow "$NONE"
out=$(python3 "$CHECK" --objs "$T/o" --root "$T/src" --allow "$T/one.allow" 2>&1); rc=$?
check "a mended exception is reported as stale but does not fail" \
  bash -c '[ "$1" -eq 0 ] && case "$2" in *"stale exception"*"lib/report/a.c lib/report/b.c"*) true ;; *) false ;; esac' _ "$rc" "$out"
# An object whose source is gone (a renamed file) is not read.
rm "$T/src/lib/report/b.c"
printf 'int a(void);\nint b(void) { return a(); }\n' >"$T/b.c"
cc -c "$T/b.c" -o "$T/o/lib/report/b.o"
check "a stale object of a removed source is left out" \
  layers --objs "$T/o" --root "$T/src" --allow "$NONE"

# An nm listing: util (the lowest layer) calling report (the highest).
cat >"$T/up.nm" <<'NM'
build/obj/lib/util/x.o:0000000000000000 T cal_x
build/obj/lib/util/x.o:                 U cal_report_y
build/obj/lib/report/y.o:0000000000000000 T cal_report_y
build/obj/lib/report/y.o:                 U cal_x
NM
out=$(python3 "$CHECK" --nm-listing "$T/up.nm" --no-size --allow "$NONE" 2>&1); rc=$?
check "an arrow from util up to report fails" [ "$rc" -eq 1 ]
case "$out" in
  *"layer: lib/util/x.c (layer 1) -> lib/report/y.c (layer 7): cal_report_y"*) ok "the arrow up is named with its layers and symbol" ;;
  *) not_ok "the arrow up is named with its layers and symbol: $out" ;;
esac
# The same pair the other way round (report calls util) is the right way.
sed '/U cal_report_y/d' "$T/up.nm" >"$T/down.nm"
check "report calling util passes" layers --nm-listing "$T/down.nm" --no-size --allow "$NONE"
# A name two files define (one per platform) ties to neither.
cat >"$T/twice.nm" <<'NM'
build/obj/lib/util/x.o:                 U cal_plat_name
build/obj/lib/platform/linux.o:0000000000000000 T cal_plat_name
build/obj/lib/report/y.o:0000000000000000 T cal_plat_name
NM
check "a name defined twice draws no arrow" layers --nm-listing "$T/twice.nm" --no-size --allow "$NONE"

# Sizes: 1,000 lines pass, 1,001 fail; tests are left out.
mkdir -p "$T/big/lib/util" "$T/big/tests/unit"
seq 1000 | sed 's/.*/\/\* & \*\//' >"$T/big/lib/util/edge.c"
seq 1001 >"$T/big/tests/unit/test_big.c"
check "a file of 1,000 lines passes" \
  layers --nm-listing "$T/down.nm" --root "$T/big" --allow "$NONE"
seq 1001 | sed 's/.*/\/\* & \*\//' >"$T/big/lib/util/big.h"
out=$(python3 "$CHECK" --nm-listing "$T/down.nm" --root "$T/big" --allow "$NONE" 2>&1); rc=$?
check "a header of 1,001 lines fails, named" \
  bash -c '[ "$1" -eq 1 ] && case "$2" in *"size: lib/util/big.h has 1001 lines"*) true ;; *) false ;; esac' _ "$rc" "$out"
finish
