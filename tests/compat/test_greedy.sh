#!/usr/bin/env bash
# Greedy text, caliper serve against llama-server, on llama.cpp's own files:
# caliper writes a model in F32 and llama-quantize makes F16, Q8_0, Q4_0,
# Q4_K_M and Q6_K from it; caliper serve holds each as stored. Both
# continue the 24 prompts of prompts.txt greedily for 16 tokens, and the
# texts are compared. llama-server keeps its KV cache in F32 without flash
# attention (-ctk f32 -ctv f32 -fa off), so what remains between the two is
# how each rounds the activations of its products:
#
#   F32      neither rounds: the same function to single-precision rounding
#   F16      llama.cpp rounds the activations to F16; caliper keeps F32
#   Q8_0     both round to Q8_0 blocks, d = max|x|/127
#   Q4_0     llama.cpp rounds to Q8_0 for Q4_0; caliper keeps F32
#   Q4_K_M,  both round to Q8_K blocks of 256, with differently computed
#   Q6_K     scales (llama.cpp −127/max, caliper 1/(max/127))
#
# So F32's text must be the same on every prompt; the others print how
# often it is. On this synthetic model (random weights: flat next-token
# distributions, where test_agreement.sh measures activation rounding
# alone moving a probability by 1e-2 to 8e-2) a rounding that differs
# flips a near tie within 16 tokens on most prompts, the first token
# included now and then; test_agreement.sh bounds the distributions
# themselves. Measured here: F32 24/24, F16 24/24, Q8_0 6/24, Q4_0 4/24,
# Q4_K_M 11/24, Q6_K 4/24 the same; the first token the same on 22-24.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/lib.sh"
PROMPTS="$COMPAT_DIR/prompts.txt"
T=$E2E_TMP

"$CALIPER" serve --preset tiny --dim 256 --ffn 512 --heads 4 --kv-heads 2 --layers 4 \
  --export-gguf "$T/m.gguf" 2>/dev/null || { not_ok "export"; finish; }

# greedy_same CALIPER_URL LLAMA_URL: "same total first_ok first_diff…"
greedy_same() {
  python3 - "$1" "$2" "$PROMPTS" <<'PY'
import json, sys, urllib.request
cal, lla, path = sys.argv[1:4]
def complete(url, prompt):
    body = json.dumps({"prompt": prompt, "max_tokens": 16, "temperature": 0,
                       "ignore_eos": True}).encode()
    r = urllib.request.Request(url + "/v1/completions", body, {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(r, timeout=300))["choices"][0]["text"]
same = first = total = 0
notes = []
for line in open(path, encoding="utf-8"):
    line = line.rstrip("\n")
    if not line:
        continue
    p = line.replace("\\n", "\n")
    a, b = complete(cal, p), complete(lla, p)
    total += 1
    same += a == b
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    # the first token: one byte, or "[N]" for the ids no text reaches
    tok0 = lambda s: s[:s.index("]") + 1] if s.startswith("[") and "]" in s else s[:1]
    first += tok0(a) == tok0(b)
    if a != b:
        notes.append("%d@%d" % (total, k))
print(same, total, first, " ".join(notes))
PY
}

for q in F32 F16 Q8_0 Q4_0 Q4_K_M Q6_K; do
  f="$T/m-$q.gguf"
  "$LLAMA_BIN/llama-quantize" --override-kv caliper.embedding_scale=float:1 "$T/m.gguf" "$f" "$q" \
    >"$T/quant.log" 2>&1 || { not_ok "llama-quantize $q"; tail -3 "$T/quant.log"; continue; }
  start_serve --model "$f" || { not_ok "$q: caliper serve --model"; continue; }
  start_llama "$f" -c 2048 -np 1 -ctk f32 -ctv f32 -fa off || { not_ok "$q: llama-server"; continue; }
  read -r same total first notes < <(greedy_same "$SERVE_URL" "$LLAMA_URL")
  echo "# $q: greedy 16 tokens the same on $same of $total prompts; first token the same on $first${notes:+; differ (prompt@character): $notes}"
  check "$q: both servers continue all 24 prompts ($total)" [ "${total:-0}" -eq 24 ]
  if [ "$q" = F32 ]; then
    check "F32: the same greedy text on every prompt ($same of $total)" [ "${same:-0}" -eq "${total:-1}" ]
  fi
  stop_llama
  kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null
done
finish
