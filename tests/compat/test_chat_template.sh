# Chat templates against llama-server: a model caliper exports in a real
# vocabulary (llama.cpp's models/ggml-vocab-*.gguf) gets a real model's
# tokenizer.chat_template (llama.cpp's models/templates/*.jinja,
# gguf_set_template.py); caliper serve --model recognises the family and
# renders it itself, llama-server (--jinja) runs the template. For each
# conversation below, both engines' /apply-template give the same text, and
# a chat request costs the same prompt tokens in both (usage.prompt_tokens
# of a 1-token completion: the template's special tokens, BOS included, as
# each engine tokenizes the rendered prompt). A template of another family is refused at
# startup, naming --chat-template; the named fallback then serves.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/lib.sh"
TPL_DIR=${LLAMA_SRC:-$(dirname "$LLAMA_BIN")/../src}/models/templates
[ -d "$TPL_DIR" ] || TPL_DIR=$(cd "$LLAMA_BIN/../../src/models/templates" 2>/dev/null && pwd)
[ -d "$TPL_DIR" ] || { not_ok "llama.cpp's models/templates not found beside $LLAMA_BIN"; finish; }
T=$E2E_TMP
VOCABS=$(cd "$TPL_DIR/.." && pwd)
"$CALIPER" serve --preset tiny --export-gguf "$T/base.gguf" 2>/dev/null || { not_ok "export"; finish; }
for v in qwen2 llama-bpe llama-spm; do
  "$CALIPER" serve --preset tiny --vocab "$VOCABS/ggml-vocab-$v.gguf" --export-gguf "$T/$v.gguf" \
    2>/dev/null || not_ok "export in the $v vocabulary"
done

CONVS=(
  '[{"role":"user","content":"hi there"}]'
  '[{"role":"system","content":"Answer briefly."},{"role":"user","content":"What is 2+2?"}]'
  '[{"role":"user","content":"one"},{"role":"assistant","content":"two"},{"role":"user","content":"three"}]'
  '[{"role":"system","content":"  sys  "},{"role":"user","content":"  padded text \n"},{"role":"assistant","content":"ok"},{"role":"user","content":"Grüße, 世界 🙂"}]'
)

# agree_tpl NAME FILE VOCAB: both engines on the model in VOCAB with FILE's template
agree_tpl() {
  local name=$1 f="$T/$1.gguf"
  python3 "$COMPAT_DIR/gguf_set_template.py" "$T/$3.gguf" "$TPL_DIR/$2" "$f" \
    || { not_ok "$name: template written into the model"; return; }
  start_serve --model "$f" || { not_ok "$name: caliper serve --model starts"; return; }
  start_llama "$f" -c 2048 -np 1 --jinja --no-warmup || { not_ok "$name: llama-server starts"; return; }
  local fam; fam=$(sed -n 's/.*chat template \([a-z0-9]*\) .*/\1/p' "$(ls -t "$E2E_TMP"/serve.* | head -1)" | head -1)
  local i=0 same=0 tok=0 conv
  for conv in "${CONVS[@]}"; do
    i=$((i + 1))
    local a b
    a=$(curl -s "$SERVE_URL/apply-template" -d "{\"messages\":$conv}" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin).get("prompt")))')
    b=$(curl -s "$LLAMA_URL/apply-template" -d "{\"messages\":$conv}" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin).get("prompt")))')
    if [ "$a" = "$b" ] && [ "$a" != null ]; then same=$((same + 1))
    else echo "# $name conversation $i: caliper $a"; echo "#   llama-server $b"; fi
    local pa pb
    pa=$(curl -s "$SERVE_URL/v1/chat/completions" -d "{\"messages\":$conv,\"max_tokens\":1}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["usage"]["prompt_tokens"])' 2>/dev/null)
    pb=$(curl -s "$LLAMA_URL/v1/chat/completions" -d "{\"messages\":$conv,\"max_tokens\":1}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["usage"]["prompt_tokens"])' 2>/dev/null)
    # and the same ids: the rendered text through each engine's /tokenize
    # as a chat prompt is tokenized (BOS as the vocabulary adds it, control
    # tokens parsed)
    local ia ib body
    body=$(python3 -c 'import json,sys; print(json.dumps({"content": json.loads(sys.argv[1]), "add_special": True, "parse_special": True}))' "$a")
    ia=$(curl -s "$SERVE_URL/tokenize" -d "$body" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])' 2>/dev/null)
    ib=$(curl -s "$LLAMA_URL/tokenize" -d "$body" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])' 2>/dev/null)
    if [ -n "$pa" ] && [ "$pa" = "$pb" ] && [ -n "$ia" ] && [ "$ia" = "$ib" ]; then tok=$((tok + 1))
    else echo "# $name conversation $i: prompt tokens caliper ${pa:-?} ${ia:0:80}, llama-server ${pb:-?} ${ib:0:80}"; fi
  done
  check "$name: recognised as $fam, same rendered text on $same/${#CONVS[@]} conversations" [ "$same" -eq ${#CONVS[@]} ]
  check "$name: same prompt token count and ids on $tok/${#CONVS[@]} conversations" [ "$tok" -eq ${#CONVS[@]} ]
  stop_llama
  kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null
}

agree_tpl qwen2.5 Qwen-Qwen2.5-7B-Instruct.jinja qwen2
agree_tpl llama3.1 meta-llama-Llama-3.1-8B-Instruct.jinja llama-bpe
agree_tpl llama3.2 meta-llama-Llama-3.2-3B-Instruct.jinja llama-bpe
agree_tpl llama3.3 meta-llama-Llama-3.3-70B-Instruct.jinja llama-bpe
agree_tpl mistral-nemo mistralai-Mistral-Nemo-Instruct-2407.jinja llama-spm
agree_tpl caliper-bytes-chatml Qwen-Qwen2.5-7B-Instruct.jinja base

# another family: refused by name, then served under the named fallback
python3 "$COMPAT_DIR/gguf_set_template.py" "$T/base.gguf" "$TPL_DIR/google-gemma-2-2b-it.jinja" "$T/gemma.gguf"
"$CALIPER" serve --model "$T/gemma.gguf" --port 0 >/dev/null 2>"$T/gemma.err"; rc=$?
check "a Gemma template is refused (rc $rc)" [ "$rc" -ne 0 ]
check "and the refusal names --chat-template" grep -q -- "--chat-template" "$T/gemma.err"
if start_serve --model "$T/gemma.gguf" --chat-template chatml; then
  out=$(curl -s "$SERVE_URL/apply-template" -d '{"messages":[{"role":"user","content":"x"}]}')
  check "--chat-template chatml serves it as ChatML" grep -q 'im_start' <<<"$out"
  kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null
else not_ok "serve --chat-template chatml starts"; fi
finish
