#!/usr/bin/env bash
# A portable binary: outside the engine's run-time-chosen kernels (declared
# with CAL_SIMD, engine/simd.h, which puts them in the section cal_simd),
# build/caliper holds no VEX or EVEX instruction and names no zmm or opmask
# register (scripts/check-isa.sh disassembles every other code section). The
# check itself: a planted AVX-512 function outside the section is named, the
# same one inside it is not.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CC=${CC:-cc}
case "$(uname -m)" in x86_64|amd64) ;; *) echo "skip - check-isa: x86-64 only"; finish ;; esac
need objdump "disassembling the binary" || finish

if "$CALIPER" --version | grep -q -- '-march=native'; then
  echo "skip - a NATIVE=1 build is meant for this CPU only"
else
  if out=$(bash "$ROOT/scripts/check-isa.sh" "$CALIPER" --expect-kernels 2>&1); then
    ok "caliper is baseline x86-64 outside cal_simd, and its AVX-512 kernels are inside"
  else
    not_ok "check-isa on caliper: $out"
  fi
fi

cat >"$E2E_TMP/plant.c" <<'C'
#include <immintrin.h>
#ifdef INSIDE
__attribute__((target("avx512f"), section("cal_simd")))
#else
__attribute__((target("avx512f")))
#endif
void planted_kernel(float *y, const float *x)
{
    _mm512_storeu_ps(y, _mm512_add_ps(_mm512_loadu_ps(x), _mm512_loadu_ps(y)));
}
int main(void) { return 0; }
C
if $CC -O2 -o "$E2E_TMP/out" "$E2E_TMP/plant.c" 2>"$E2E_TMP/cc.log" &&
   $CC -O2 -DINSIDE -o "$E2E_TMP/in" "$E2E_TMP/plant.c" 2>>"$E2E_TMP/cc.log"; then
  out=$(bash "$ROOT/scripts/check-isa.sh" "$E2E_TMP/out" 2>&1); rc=$?
  [ $rc -eq 1 ] && grep -q 'in planted_kernel: EVEX' <<<"$out" &&
    ok "an AVX-512 function outside cal_simd is named" ||
    not_ok "planted AVX-512 outside cal_simd: rc $rc: $out"
  out=$(bash "$ROOT/scripts/check-isa.sh" "$E2E_TMP/in" --expect-kernels 2>&1); rc=$?
  [ $rc -eq 0 ] && ok "the same function inside cal_simd passes" ||
    not_ok "planted AVX-512 inside cal_simd: rc $rc: $out"
  out=$(bash "$ROOT/scripts/check-isa.sh" "$E2E_TMP/out" --expect-kernels 2>&1); rc=$?
  [ $rc -eq 1 ] && grep -q 'no AVX-512 kernels in section cal_simd' <<<"$out" &&
    ok "a binary without cal_simd fails --expect-kernels" ||
    not_ok "--expect-kernels without the section: rc $rc: $out"
else
  not_ok "planted binaries do not build: $(head -3 "$E2E_TMP/cc.log")"
fi
finish
