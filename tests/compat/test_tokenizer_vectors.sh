# caliper's tokenizers against llama.cpp's own test vectors (its
# models/ggml-vocab-*.gguf with .inp/.out, checked by test-tokenizer-0):
# SentencePiece (llama-spm) and byte-level BPE with the llama3, qwen2 and
# gpt-2 pre-tokenizers. Every case must give exactly llama.cpp's ids.
# LLAMA_SRC: llama.cpp's source tree (default: beside LLAMA_BIN's build).
source "$(dirname "$0")/../e2e/lib.sh"
: "${BUILD:?BUILD must point at the build directory}"
TV="$BUILD/compat/tokenize_vectors"
LLAMA_SRC=${LLAMA_SRC:-${LLAMA_BIN:+$LLAMA_BIN/../../src}}
: "${LLAMA_SRC:?LLAMA_SRC (or LLAMA_BIN) must point at llama.cpp}"
[ -x "$TV" ] || { not_ok "$TV is not built (make compat builds it)"; finish; }
for v in llama-spm llama-bpe qwen2 gpt-2; do
  f="$LLAMA_SRC/models/ggml-vocab-$v.gguf"
  if [ ! -f "$f" ] || [ ! -f "$f.inp" ] || [ ! -f "$f.out" ]; then
    not_ok "$v: $f and its .inp/.out are missing"; continue
  fi
  "$TV" "$f" >"$E2E_TMP/$v.out" 2>&1; rc=$?
  tail -1 "$E2E_TMP/$v.out"
  if [ $rc -eq 0 ]; then ok "$v: every case as llama.cpp"
  else not_ok "$v: mismatches"; head -40 "$E2E_TMP/$v.out"; fi
done
finish
