#!/usr/bin/env bash
# caliper serve against llama-server on llama.cpp's own files, measured as
# a user measures a server: through `caliper run`, the two servers
# alternated shot by shot (`caliper run --ab`), the same file and thread
# count, each with its defaults. The files: caliper writes PRESET's weights
# in F32, and llama.cpp's llama-quantize makes every other format from it
# (F16, BF16, Q8_0, Q4_0, Q4_K_M, Q6_K: its own mixtures, e.g. Q6_K for
# output.weight in Q4_0 and Q4_K_M files); caliper holds each tensor as
# stored. Needs `make compat` to have built llama.cpp once.
#
#   scripts/compat-speed.sh [PRESET] [ROUNDS] [FORMATS] [CONCURRENCY]
#     PRESET       caliper's preset (default base: a 100 M llama)
#     ROUNDS       paired shots per format (default 5)
#     FORMATS      comma-separated (default f32,f16,bf16,q8_0,q4_0,q4_k_m,q6_k)
#     CONCURRENCY  1 (default): prefill of 512 tokens and batch-1 decode;
#                  N > 1: N streams at once against llama-server -np N
#                  (and caliper serve --max-batch N): aggregate and
#                  per-request columns
#   THREADS (2), PROMPT (512), OUT (64), REQUESTS (3 at c1, 2N otherwise),
#   SPEED_DIR (a folder to keep the files in between runs)
#
# Prints one Markdown row per format: caliper ÷ llama-server for each
# column (for throughput: llama's time ÷ caliper's), the median of the
# shots' paired ratios with their least and greatest, both medians, and the
# load average before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
P=${1:-base}; ROUNDS=${2:-5}; FORMATS=${3:-f32,f16,bf16,q8_0,q4_0,q4_k_m,q6_k}; CONC=${4:-1}
THREADS=${THREADS:-2}; PROMPT=${PROMPT:-512}; OUT=${OUT:-64}
REQUESTS=${REQUESTS:-$([ "$CONC" -gt 1 ] && echo $((2 * CONC)) || echo 3)}
BIN=$(bash scripts/compat-build.sh)
CAL=$PWD/build/caliper
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
D=${SPEED_DIR:-$W}
mkdir -p "$D"
f32="$D/$P-f32-export.gguf"
[ -s "$f32" ] || "$CAL" serve --preset "$P" --export-gguf "$f32" >&2
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

echo "# $P, $THREADS threads, prompt $PROMPT, $OUT tokens out, concurrency $CONC, $ROUNDS paired shots of $REQUESTS requests; llama.cpp $(basename "$(dirname "$(dirname "$BIN")")")"
if [ "$CONC" -eq 1 ]; then
  echo "| file | prefill caliper ÷ llama (range) | decode caliper ÷ llama (range) | caliper prefill / decode tok/s | llama prefill / decode tok/s | load before → after |"
else
  echo "| file | aggregate caliper ÷ llama (range) | per-request caliper ÷ llama (range) | caliper aggregate / per-request tok/s | llama aggregate / per-request tok/s | load before → after |"
fi
echo "|---|---|---|---|---|---|"
IFS=, read -ra FMTS <<<"$FORMATS"
for fmt in "${FMTS[@]}"; do
  Q=$(tr a-z A-Z <<<"$fmt")
  f="$D/$P-$fmt.gguf"
  # llama.cpp's quantizer writes every file, F32 included; the key that
  # would let caliper hold token_embd and output.weight as one matrix is
  # set to say nothing (both engines then hold both, as stored)
  [ -s "$f" ] || "$BIN/llama-quantize" --override-kv caliper.embedding_scale=float:1 \
    "$f32" "$f" "$Q" >"$W/quant.log" 2>&1 || { echo "| $fmt | llama-quantize $Q failed: $(tail -1 "$W/quant.log") |"; continue; }
  pa=$(port); pb=$(port)
  ctx=$(( (PROMPT + OUT + 64) * CONC )); [ "$ctx" -lt 2048 ] && ctx=2048
  l0=$(load)
  "$CAL" run --ab \
    --launch "$CAL serve --model $f --port $pa --threads $THREADS --context $((PROMPT + OUT + 64)) $([ "$CONC" -gt 1 ] && echo "--max-batch $CONC")" \
    --url "http://127.0.0.1:$pa" \
    --launch "$BIN/llama-server -m $f --host 127.0.0.1 --port $pb -t $THREADS -tb $THREADS -c $ctx -np $CONC --no-webui" \
    --url "http://127.0.0.1:$pb" \
    --shots "$ROUNDS" --warmup 1 --prompt-tokens "$PROMPT" --max-tokens "$OUT" \
    --requests "$REQUESTS" --concurrency "$CONC" --no-telemetry \
    --db "$W/ab.db" --json "$W/ab-$fmt.json" >"$W/run-$fmt.log" 2>&1 \
    || { echo "| $fmt | caliper run failed: $(tail -2 "$W/run-$fmt.log" | tr '\n' ' ') |"; continue; }
  l1=$(load)
  python3 - "$W/ab-$fmt.json" "$fmt" "$CONC" "$l0" "$l1" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
fmt, conc, l0, l1 = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
cells = [c for c in d["cells"] if c.get("shot_kind") != "warmup"]
key = lambda c: (c["shot_index"], c["concurrency"], c["prompt_tokens"])
a = {key(c): c for c in cells if c["target"] == "A"}
b = {key(c): c for c in cells if c["target"] == "B"}
cols = (["prefill_tps_median", "decode_tps_median"] if conc == 1
        else ["output_throughput", "per_request_output_throughput_median"])
out = [fmt]
meds = []
for f in cols:
    xs = [(a[k][f], b[k][f]) for k in sorted(a) if k in b and a[k].get(f) and b[k].get(f)]
    if not xs:
        out.append("no pairs")
        meds.append(("—", "—"))
        continue
    r = sorted(x / y for x, y in xs)
    out.append("**%.2f×** (%.2f–%.2f, %d)" % (statistics.median(r), r[0], r[-1], len(r)))
    meds.append(("%.0f" % statistics.median(x for x, _ in xs), "%.0f" % statistics.median(y for _, y in xs)))
out.append("%s / %s" % (meds[0][0], meds[1][0]))
out.append("%s / %s" % (meds[0][1], meds[1][1]))
out.append("%s → %s" % (l0, l1))
print("| " + " | ".join(out) + " |")
PY
done
