# llama-server and caliper serve on the same exported model, one per
# vocabulary of llama.cpp's test set (SentencePiece, llama3, qwen2 and
# gpt-2 BPE), the model written by caliper serve --vocab FILE
# --export-gguf: llama-server must load it, and /tokenize must agree on
# 2,000 generated texts (prose, code, JSON, CJK, emoji, whitespace runs,
# special-token texts, add_special/parse_special variants, and bodies that
# are not UTF-8, which both must refuse): 100 % agreement.
# LLAMA_SRC: llama.cpp's source tree (default: beside LLAMA_BIN's build).
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/lib.sh"
LLAMA_SRC=${LLAMA_SRC:-$LLAMA_BIN/../../src}
N=${TOKENIZER_STRINGS:-2000}
python3 "$COMPAT_DIR/tokenizer_strings.py" "$N" >"$E2E_TMP/strings.jsonl"
for v in llama-spm llama-bpe qwen2 gpt-2; do
  f="$LLAMA_SRC/models/ggml-vocab-$v.gguf"
  [ -f "$f" ] || { not_ok "$v: $f is missing"; continue; }
  arch=llama; [ $v = qwen2 ] && arch=qwen2
  m="$E2E_TMP/$v.model.gguf"
  "$CALIPER" serve --preset tiny --arch $arch --dtype f16 --vocab "$f" --export-gguf "$m" \
    2>"$E2E_TMP/$v.export" || { not_ok "$v: export"; cat "$E2E_TMP/$v.export"; continue; }
  start_llama "$m" -c 512 -np 1 && ok "$v: llama-server loads the exported model" \
    || { not_ok "$v: llama-server loads the exported model"; continue; }
  start_serve --model "$m" --max-batch 1 --context 512 \
    || { not_ok "$v: caliper serve"; stop_llama; continue; }
  python3 "$COMPAT_DIR/tokenizer_agree.py" "$E2E_TMP/strings.jsonl" "$LLAMA_URL" "$SERVE_URL" \
    >"$E2E_TMP/$v.agree" 2>&1; rc=$?
  tail -2 "$E2E_TMP/$v.agree"
  if [ $rc -eq 0 ]; then ok "$v: /tokenize agrees on all $N texts"
  else not_ok "$v: /tokenize differs"; head -60 "$E2E_TMP/$v.agree"; fi
  kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null
  stop_llama
done
finish
