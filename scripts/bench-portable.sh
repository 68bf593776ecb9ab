#!/usr/bin/env bash
# Portable against native engine decode: bench/engine from the default
# build (baseline x86-64, kernels chosen at run time) and from a NATIVE=1
# build, run one after the other PAIRS times; for each format the ratio
# portable ÷ native of aggregate decode tok/s at batch 1 and 8 in each pair,
# and the median over the pairs (a host's bandwidth drifts between runs; a
# pair's two runs are minutes apart at most).
# Usage: scripts/bench-portable.sh [PAIRS] [PRESET] [ROUNDS]
# Builds both first: make bench; make BUILD=build/native NATIVE=1 bench.
set -euo pipefail
pairs=${1:-4}; preset=${2:-small}; rounds=${3:-3}
P=build/bench/engine; N=build/native/bench/engine
[ -x "$P" ] && [ -x "$N" ] || { echo "build both: make bench && make BUILD=build/native NATIVE=1 bench" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for i in $(seq "$pairs"); do
  for b in p n; do
    bin=$P; [ $b = n ] && bin=$N
    "$bin" "$preset" 64 "$rounds" f32,f16,bf16,q8_0 >"$tmp/$b.$i" 2>/dev/null
  done
  echo "pair $i of $pairs done" >&2
done
# table rows: dtype MB/tok | roof B1cold % (range) | pf % | B1 B2 B4 B8 B16 | ...
for i in $(seq "$pairs"); do
  join <(awk '$1 ~ /^(f32|f16|bf16|q8_0)$/ && $3 == "|" {print $1, $12, $15}' "$tmp/p.$i" | sort) \
       <(awk '$1 ~ /^(f32|f16|bf16|q8_0)$/ && $3 == "|" {print $1, $12, $15}' "$tmp/n.$i" | sort) |
    awk '{printf "%s %.4f %.4f %s %s %s %s\n", $1, $2 / $4, $3 / $5, $2, $4, $3, $5}'
done >"$tmp/ratios"
echo "portable ÷ native decode, preset $preset, median of $pairs pairs (range):"
printf '%-5s %22s %22s\n' dtype "batch 1" "batch 8"
for dt in f32 f16 bf16 q8_0; do
  r1=$(awk -v d=$dt '$1 == d {print $2}' "$tmp/ratios" | sort -g)
  r8=$(awk -v d=$dt '$1 == d {print $3}' "$tmp/ratios" | sort -g)
  med() { awk '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                printf "%.3f (%.2f–%.2f)", m, v[1], v[NR]}'; }
  printf '%-5s %22s %22s\n' $dt "$(med <<<"$r1")" "$(med <<<"$r8")"
done
echo "kernels: $(grep -o 'kernels [^,]*' "$tmp/p.1")"
