# The engine checked against a third-party implementation: caliper writes a
# preset's weights as GGUF, and on that very file caliper's engine (the path
# `caliper serve --model` takes: config check, mmap load, byte tokenizer)
# and llama-server give the same next-token distribution after each of 24
# prompts (tests/compat/prompts.txt): the same tokens for the prompt, the
# same top-5 ids, each probability within the tolerance. Dense (tiny) and MoE
# (moe) presets in F32, and tiny in F16; then every architecture (llama,
# qwen2, qwen3, qwen3moe) in F32, Q8_0 and Q4_K_M; then files that
# llama.cpp's own quantizer wrote (Q4_K_M, Q5_K_M and Q4_1 on a width that
# is not whole super-blocks). Then `caliper serve --model` and llama-server
# continue 6 prompts greedily to the same text.
#
# Tolerances. F32: both engines compute in single precision and differ only
# in the order of additions (OpenBLAS vs ggml's kernels) and in exp/silu
# approximations, ~1e-6 relative on the logits; 1e-4 on a probability
# leaves two orders of margin, while any real difference in the function
# (RoPE pairing, norm epsilon, expert gating, a transposed weight) moves
# probabilities by 1e-2 or more. F16: ggml multiplies F16 weights by
# activations rounded to F16 (caliper widens the weights and keeps F32
# activations), a relative error of 2^-11 per product through every layer;
# 5e-3 covers that. llama-server runs with an F32 KV cache (-ctk/-ctv f32)
# and flash attention off: its CPU flash-attention kernel rounds through F16
# and alone moves probabilities by ~1e-4 (measured: 0.018540 vs 0.018407).
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/lib.sh"
PROMPTS="$COMPAT_DIR/prompts.txt"

agree() { # NAME PRESET DTYPE TOL [serve flags: --arch, shape]
  # TOL "xK": K times the file's own sensitivity to activation rounding;
  # CAL_DTYPE: the format caliper's engine holds the file in (default f32)
  local name=$1 preset=$2 dtype=$3 tol=$4 f="$E2E_TMP/$1.gguf"
  shift 4
  "$CALIPER" serve --preset "$preset" "$@" --export-gguf "$f" --dtype "$dtype" 2>"$E2E_TMP/$name.export" \
    && ok "$name: exported ($(cat "$E2E_TMP/$name.export"))" \
    || { not_ok "$name: export"; cat "$E2E_TMP/$name.export"; return; }
  if [ -n "${QUANT:-}" ]; then quantized "$name" "$f" || return; f="$E2E_TMP/$name.$QUANT.gguf"; fi
  "$NEXT_TOKEN" "$f" "$PROMPTS" 5 ${CAL_DTYPE:-} >"$E2E_TMP/$name.cal" 2>"$E2E_TMP/$name.cal.err" \
    || { not_ok "$name: caliper's engine on the file"; cat "$E2E_TMP/$name.cal.err"; return; }
  if [[ $tol == x* ]]; then
    "$NEXT_TOKEN" "$f" "$PROMPTS" 5 q8_0 >"$E2E_TMP/$name.q8" 2>>"$E2E_TMP/$name.cal.err" \
      || { not_ok "$name: caliper's Q8_0 path on the file"; cat "$E2E_TMP/$name.cal.err"; return; }
    # measured from the F32 path (every matrix widened exactly, activations
    # kept in F32), whichever path is under test
    local base="$E2E_TMP/$name.f32"
    "$NEXT_TOKEN" "$f" "$PROMPTS" 5 f32 >"$base" 2>>"$E2E_TMP/$name.cal.err" \
      || { not_ok "$name: caliper's F32 path on the file"; cat "$E2E_TMP/$name.cal.err"; return; }
    local s; s=$(python3 "$COMPAT_DIR/sensitivity.py" "$base" "$E2E_TMP/$name.q8")
    local k=${tol#x}
    tol=$(python3 -c "import sys; print('%.4g' % max(float(sys.argv[1]) * float(sys.argv[2]), 1e-3))" "$k" "$s")
    echo "# $name: activation rounding alone moves caliper's probabilities by up to $s; tolerance $k x that = $tol"
  fi
  start_llama "$f" -c 2048 -np 1 -ctk f32 -ctv f32 -fa off --no-warmup \
    || { not_ok "$name: llama-server loads the file"; return; }
  ok "$name: llama-server loads caliper's GGUF"
  python3 "$COMPAT_DIR/agreement.py" "$LLAMA_URL" "$E2E_TMP/$name.cal" "$tol" >"$E2E_TMP/$name.agree"
  local rc=$?
  sed "s/^\(not \)\{0,1\}ok - /&$name: /" "$E2E_TMP/$name.agree" | grep -E '^(not ok|#)'
  [ $rc -eq 0 ] && ok "$name: next-token top-5 agree on $(grep -c '^ok' "$E2E_TMP/$name.agree") prompts ($(tail -1 "$E2E_TMP/$name.agree" | sed 's/^# //'))" \
    || not_ok "$name: next-token distributions differ"
  if [ "$name" = tiny-f32 ]; then greedy "$f"; fi
  stop_llama
}

quantized() { # NAME F32FILE: $QUANT by llama.cpp's own quantizer, read exactly
  local name=$1 f=$2 q="$E2E_TMP/$1.$QUANT.gguf"
  # caliper.embedding_scale set to 1: the file no longer says its token_embd
  # is output.weight scaled (llama-quantize rounds the two apart, to Q4_1
  # and Q8_0 say), so caliper serves both as stored, as it does a file of
  # any other origin and as llama.cpp does
  "$LLAMA_BIN/llama-quantize" --override-kv caliper.embedding_scale=float:1 "$f" "$q" "$QUANT" \
    >"$E2E_TMP/$name.quant" 2>&1 \
    || { not_ok "$name: llama-quantize $QUANT"; tail -5 "$E2E_TMP/$name.quant"; return 1; }
  # the formats llama.cpp chose, as caliper serve names them: held as
  # stored where the engine has the format and the rows fit its kernels,
  # the others widened exactly to F32
  local held; held=$("$CALIPER" serve --model "$q" --port 0 --export-gguf "$E2E_TMP/$name.held.gguf" \
                     2>&1 | grep -o "weights held as stored: .*")
  echo "# $name: ${held%%; [0-9]* MB held*}"
  local want types=${held#weights held as stored: }
  types=${types%% MB held*}
  for want in $WANT_TYPES; do
    check "$name: llama-quantize $QUANT wrote $want tensors ($want named at startup)" grep -qw "$want" <<<"$types"
  done
  for want in ${WANT_STORED:-}; do
    check "$name: its $want tensors are held as stored" grep -qE "held as stored: ([A-Z0-9_]+ [0-9]+ %, )*$want [0-9]+ %" <<<"$held"
  done
  # what caliper holds, written back: llama.cpp's file, tensor for tensor,
  # bit for bit where held as stored (the widened ones go back as F32)
  if [ -z "${WIDENED:-}" ]; then
    python3 "$COMPAT_DIR/same_tensors.py" --raw "$q" "$E2E_TMP/$name.held.gguf" >"$E2E_TMP/$name.same-held"
    check "$name: held as stored and written back, every tensor is llama.cpp's bit for bit ($(tail -1 "$E2E_TMP/$name.same-held" | sed 's/^# //'))" \
      [ $? -eq 0 ]
  fi
  "$CALIPER" serve --model "$q" --port 0 --export-gguf "$E2E_TMP/$name.back.gguf" --dtype f32 \
    >/dev/null 2>&1 || { not_ok "$name: caliper widens the file to F32"; return 1; }
  # llama.cpp's own dequantization of every tensor, against caliper's
  # loader: bit for bit
  "$LLAMA_BIN/llama-quantize" --allow-requantize "$q" "$E2E_TMP/$name.deq.gguf" F32 \
    >>"$E2E_TMP/$name.quant" 2>&1 || { not_ok "$name: llama-quantize back to F32"; return 1; }
  python3 "$COMPAT_DIR/same_tensors.py" "$E2E_TMP/$name.deq.gguf" "$E2E_TMP/$name.back.gguf" \
    >"$E2E_TMP/$name.same"
  local rc=$?
  grep -v '^#' "$E2E_TMP/$name.same" | head -5
  check "$name: caliper reads every tensor as llama.cpp dequantizes it ($(tail -1 "$E2E_TMP/$name.same" | sed 's/^# //'))" \
    [ $rc -eq 0 ]
  rm -f "$E2E_TMP/$name.deq.gguf" "$E2E_TMP/$name.back.gguf" "$E2E_TMP/$name.held.gguf"
}

greedy() { # caliper serve --model and llama-server continue prompts alike
  start_serve --model "$1" || { not_ok "caliper serve --model"; return; }
  local same=0 total=0 line
  while IFS= read -r line && [ $total -lt 6 ]; do
    [ -z "$line" ] && continue
    total=$((total + 1))
    local body; body=$(python3 -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": 8, "temperature": 0}))' "$line")
    local a b
    a=$(curl -s "$SERVE_URL/v1/completions" -H 'Content-Type: application/json' -d "$body" | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])')
    b=$(curl -s "$LLAMA_URL/v1/completions" -H 'Content-Type: application/json' -d "$body" | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])')
    if [ -n "$a" ] && [ "$a" = "$b" ]; then same=$((same + 1)); else echo "# greedy differs: caliper '$a' llama-server '$b'"; fi
  done < <(grep -v '\\' "$PROMPTS")
  [ $same -eq $total ] && [ $total -eq 6 ] && ok "caliper serve --model and llama-server: same greedy 8 tokens on $same/$total prompts" \
    || not_ok "greedy continuations: $same/$total the same"
  kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null
}

agree tiny-f32 tiny f32 1e-4
agree moe-f32 moe f32 1e-4
agree tiny-f16 tiny f16 5e-3
# every architecture, on a shape whose rows are whole K-quant blocks
KQ=(--dim 256 --ffn 512 --heads 4 --kv-heads 2 --layers 2)
for arch in llama qwen2 qwen3; do
  agree "$arch-f32" tiny f32 1e-4 --arch "$arch" "${KQ[@]}"
done
agree qwen3moe-f32 moe f32 1e-4 --arch qwen3moe
# Llama 3's RoPE frequency factors (rope_freqs.weight), on llama-f32's shape
# and seed: the agreement checks the factors only if they matter, so the
# file without them must differ by far more than the tolerance
agree llama3rope-f32 tiny f32 1e-4 --rope-scaling llama3 "${KQ[@]}"
eff=$(python3 "$COMPAT_DIR/sensitivity.py" "$E2E_TMP/llama3rope-f32.cal" "$E2E_TMP/llama-f32.cal")
check "the RoPE factors move caliper's probabilities by $eff, 10x the tolerance or more" \
  python3 -c "import sys; assert float(sys.argv[1]) >= 1e-3" "$eff"
# Quantized files, held as stored: each product takes its matrix's own
# kernel, and both engines round the activations first (to Q8_0 blocks of
# 32 for Q8_0 weights, to Q8_K blocks of 256 for Q4_K and Q6_K). They do
# not compute the rounding's scale the same way (llama.cpp: −127/max,
# caliper: 1/(max/127)), nor add the sums in the same order, so an
# activation now and then rounds the other way. So the bound is the file's
# own sensitivity to activation rounding, measured on caliper's side
# (sensitivity.py: the same file through caliper's F32 path and its Q8_0
# path), times a factor: 2.5 for Q8_0, where the two roundings are the same
# kind; 8 for Q4_K_M, whose Q8_K rounding (one scale per 256 values) is
# coarser than the Q8_0 that measures it. The top-5 ids must agree in every
# case. A Q4_K_M file is Q4_K and Q6_K, held as such (Q, K and V split by
# format in the layers whose attn_v is Q6_K); then a Q4_K file converted to
# Q4_K by the engine's --dtype path (next_token's DTYPE), which must give
# the file's own Q4_K (interleaved on AVX-512 VNNI, engine/q4kx.c).
for arch in llama qwen2 qwen3 qwen3moe; do
  pre=tiny; extra=(); [ $arch = qwen3moe ] && { pre=moe; extra=(--vocab 4096); }
  agree "$arch-q8_0" $pre q8_0 x2.5 --arch "$arch" "${KQ[@]}" "${extra[@]}"
  agree "$arch-q4_k_m" $pre q4_k_m x8 --arch "$arch" "${KQ[@]}" "${extra[@]}"
  CAL_DTYPE=q4_k agree "$arch-q4_k" $pre q4_k x8 --arch "$arch" "${KQ[@]}" "${extra[@]}"
done
# Files llama.cpp's own quantizer wrote. First a Q4_K_M file of a width in
# whole super-blocks: Q4_K and Q6_K (output.weight, and attn_v and ffn_down
# of some layers, so Q, K and V are split by format), held as stored by
# caliper's engine and written back bit for bit; both engines round the
# activations to Q8_K for every product (llama.cpp with −127/max, caliper
# with 1/(max/127), so now and then one rounds the other way), and the
# bound is Q4_K_M's.
WANT_TYPES="Q4_K Q6_K" WANT_STORED="Q4_K Q6_K" QUANT=Q4_K_M \
  agree llama-256-q4_k_m tiny f32 x8 "${KQ[@]}"
WANT_TYPES="Q4_0 Q6_K" WANT_STORED="Q4_0 Q6_K" QUANT=Q4_0 \
  agree llama-256-q4_0 tiny f32 x8 "${KQ[@]}"
# Then on a width that is not whole super-blocks (224; Qwen2.5 0.5B's is
# 896): there llama.cpp falls back from Q4_K to Q5_0, from Q5_K to Q5_1 and
# from Q6_K to Q8_0, so a real Q4_K_M file of such a model is mostly Q5_0.
# The ffn_down rows (512) stay K-quants. caliper holds what it has kernels
# for as stored (Q8_0, Q4_K, Q6_K) and widens the rest exactly to F32
# (checked bit for bit against llama.cpp's dequantization); llama.cpp
# rounds the activations to Q8_0 or Q8_K in each product, so the bound is
# Q4_K_M's.
QS=(--dim 224 --heads 7 --kv-heads 1 --ffn 512 --layers 2 --arch qwen2)
WIDENED=1 WANT_TYPES="Q5_0 Q8_0 Q4_K Q6_K" WANT_STORED="Q8_0 Q4_K Q6_K" QUANT=Q4_K_M \
  agree qwen2-224-q4_k_m tiny f32 x8 "${QS[@]}"
WIDENED=1 WANT_TYPES="Q5_1 Q8_0 Q5_K Q6_K" WANT_STORED="Q8_0 Q6_K" QUANT=Q5_K_M \
  agree qwen2-224-q5_k_m tiny f32 x8 "${QS[@]}"
WIDENED=1 WANT_TYPES="Q4_1" QUANT=Q4_1 agree qwen2-224-q4_1 tiny f32 x8 "${QS[@]}"
finish
