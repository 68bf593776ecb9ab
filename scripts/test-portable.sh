#!/usr/bin/env bash
# `make test-portable`: the binary built here, run as CPUs without AVX-512
# under qemu-x86_64 (Debian's qemu-user; its TCG has no AVX-512 at all, so a
# stray AVX-512 instruction is SIGILL). For each CPU model: the engine's
# kernel, K-quant, 32-weight format and engine tests (CAL_EMULATED_CPU tells those that check
# an AVX-512 VNNI kernel to check its refusal instead), then `caliper serve --preset tiny` and a 4-request
# `caliper run` against it, both under qemu, and the kernels serve chose,
# checked against what the model has: Nehalem (SSE4.2: plain C throughout),
# Haswell (AVX2 and FMA: the element-wise kernels' AVX2 path).
# Usage: scripts/test-portable.sh BUILD
set -uo pipefail
build=${1:?usage: scripts/test-portable.sh BUILD}
root=$(cd "$(dirname "$0")/.." && pwd)
export CALIPER=$root/$build/caliper   # lib.sh wants one; replaced per CPU below
source "$root/tests/e2e/lib.sh"
case "$(uname -m)" in x86_64|amd64) ;; *) echo "skip - qemu-x86_64 models x86-64 CPUs only"; finish ;; esac
need qemu-x86_64 "running the binary as older CPUs (Debian: qemu-user)" || finish

# CPU model, and the kernel line `caliper serve` must print on it
models=("Nehalem|decode portable, element-wise portable, bf16 prefill portable"
        "Haswell|decode portable, element-wise avx2, bf16 prefill portable")
for m in "${models[@]}"; do
  cpu=${m%%|*}; want=${m#*|}
  q=(qemu-x86_64 -cpu "$cpu")
  for t in test_kernels test_kquants test_q32 test_engine; do
    if CAL_EMULATED_CPU=$cpu "${q[@]}" "$root/$build/tests/$t" >"$E2E_TMP/$t.$cpu.log" 2>&1; then
      ok "$cpu: $t ($(grep -o '[0-9]* test(s) run' "$E2E_TMP/$t.$cpu.log"))"
    else
      not_ok "$cpu: $t: $(grep -E 'FAILED|Illegal|signal' "$E2E_TMP/$t.$cpu.log" | head -3)"
    fi
  done
  # serve's wrapper execs qemu, so SERVE_PID is the emulated server; OpenBLAS
  # is told its core so that serve does not re-exec itself outside qemu
  w="$E2E_TMP/caliper-$cpu"
  printf '#!/bin/sh\nOPENBLAS_CORETYPE=%s exec qemu-x86_64 -cpu %s "%s" "$@"\n' \
    "$cpu" "$cpu" "$root/$build/caliper" >"$w"
  chmod +x "$w"
  CALIPER=$w
  if start_serve --preset tiny --threads 1; then
    line=$(grep -h 'caliper serve: kernels:' "$E2E_TMP"/serve.* | tail -1)
    echo "# $cpu: ${line#caliper serve: }"
    [ "${line#caliper serve: kernels: }" = "$want" ] && ok "$cpu: serve chose $want" ||
      not_ok "$cpu: serve's kernels: '$line', expected '$want'"
    if "$CALIPER" run --url "$SERVE_URL" --requests 4 --shots 1 --prompt-tokens 8 --max-tokens 8 \
         --no-telemetry --db "$E2E_TMP/$cpu.db" >"$E2E_TMP/run.$cpu.log" 2>&1; then
      ok "$cpu: caliper run, 4 requests against caliper serve"
    else
      not_ok "$cpu: caliper run: $(tail -3 "$E2E_TMP/run.$cpu.log")"
    fi
    kill -TERM "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
    rm -f "$E2E_TMP"/serve.*
  else
    not_ok "$cpu: caliper serve did not start"
  fi
done
finish
