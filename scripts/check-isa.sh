#!/usr/bin/env bash
# Does a binary run on any x86-64? The engine's vector kernels are built for
# AVX2, AVX-512, VNNI or BF16 and chosen at run time from cpuid; each one is
# declared with CAL_SIMD (engine/simd.h), which puts it in the section
# cal_simd. Every other code section must hold only baseline instructions.
# This disassembles them (objdump -d -w) and names each instruction that is
# VEX-encoded (AVX, AVX2, FMA: first opcode byte c4/c5 after any legacy
# prefix) or EVEX-encoded (AVX-512: 62, never a valid opcode in 64-bit
# mode), or that names a zmm or an opmask register, with its function.
# Usage: scripts/check-isa.sh BINARY [--expect-kernels]
#   --expect-kernels: also fail unless cal_simd exists and holds AVX-512
#   (so a check that cannot see the kernels cannot pass by accident).
# Exit: 0 clean, 1 found (or no kernels where expected), 2 usage / no objdump.
set -uo pipefail
bin=${1:-}; expect=${2:-}
[ -n "$bin" ] && [ -f "$bin" ] || { echo "usage: scripts/check-isa.sh BINARY [--expect-kernels]" >&2; exit 2; }
command -v objdump >/dev/null || { echo "check-isa: objdump not found (binutils)" >&2; exit 2; }
case "$(uname -m)" in x86_64|amd64) ;; *) echo "check-isa: not x86-64: nothing to check"; exit 0 ;; esac

# code sections: objdump -h prints the flags (CODE) on the line after the name
secs=$(objdump -h "$bin" | awk '/^ *[0-9]+ /{name=$2} /CODE/{print name}')
rest=$(printf '%s\n' $secs | grep -vx cal_simd)
scan() { # sections... : "function: instruction" for every non-baseline one
  local args=() s
  for s in "$@"; do args+=(-j "$s"); done
  objdump -d -w "${args[@]}" "$bin" | awk -F'\t' '
    /^[0-9a-f]+ <.*>:$/ { fn = $0; sub(/^[0-9a-f]+ </, "", fn); sub(/>:$/, "", fn); next }
    NF >= 3 {
      b = $2; sub(/^ +/, "", b)
      while (b ~ /^(26|2e|36|3e|64|65|66|67|f0|f2|f3) /) b = substr(b, 4)
      kind = ""
      if (b ~ /^62 /) kind = "EVEX"
      else if (b ~ /^c[45] /) kind = "VEX"
      else if ($3 ~ /%zmm|%k[0-7]/) kind = "AVX-512 register"
      if (kind != "") { gsub(/ +/, " ", $3); print fn ": " kind ": " $3 }
    }'
}
found=$(scan $rest)
status=0
if [ -n "$found" ]; then
  echo "check-isa: $(printf '%s\n' "$found" | wc -l) instructions beyond baseline x86-64 outside cal_simd in $bin:"
  printf '%s\n' "$found" | awk -F': ' '{n[$1]++; if (!($1 in ex)) ex[$1] = $0}
    END {for (f in n) print "  " n[f] "x in " ex[f]}' | sort | head -20
  status=1
fi
nk=0
if printf '%s\n' $secs | grep -qx cal_simd; then
  nk=$(scan cal_simd | grep -c 'EVEX')
fi
if [ "$expect" = --expect-kernels ] && [ "$nk" -eq 0 ]; then
  echo "check-isa: no AVX-512 kernels in section cal_simd of $bin"
  status=1
fi
[ $status -eq 0 ] && echo "check-isa: $bin: baseline x86-64 outside cal_simd ($nk EVEX instructions inside, in $(printf '%s\n' $rest | wc -l) other code sections none)"
exit $status
