#!/usr/bin/env bash
# caliper serve --export-gguf and --model end to end: the export replaces a
# regular file whole and refuses any other kind of path (a link would have
# its target overwritten, a FIFO would block the export forever); a preset
# served back from its export is the same model with the same parameter
# count; a file's long context_length is held to a default the KV cache
# can afford, saying so, unless --context asks for more.
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
T=$E2E_TMP
cd "$T" || exit 1

# export_refused NAME KIND: the export to NAME exits 2 promptly (timeout's
# 124 would be a hang), naming the path and what it is
export_refused() {
  timeout 120 "$CALIPER" serve --export-gguf "$1" >/dev/null 2>"$T/err"; local rc=$?
  check "--export-gguf to $2 exits 2 (rc $rc)" [ "$rc" -eq 2 ]
  check "--export-gguf to $2 names the path" grep -q -- "--export-gguf: \"$1\" is $2" "$T/err"
}

echo "keep me" >target
ln -s target link
export_refused link "a symbolic link"
check "the link's target is untouched" [ "$(cat target)" = "keep me" ]
check "the link is still a link to it" [ "$(readlink link)" = target ]

mkfifo fifo
export_refused fifo "a FIFO"
check "the FIFO is still a FIFO" [ -p fifo ]

mkdir dir
export_refused dir "a directory"

# a regular file is replaced by the model, and nothing else is left behind
"$CALIPER" serve --export-gguf target 2>"$T/err"; rc=$?
check "--export-gguf over a regular file exits 0" [ "$rc" -eq 0 ]
check "the file now holds a GGUF" [ "$(head -c 4 target)" = GGUF ]
check "no temporary file is left beside it" [ -z "$(ls -A | grep -v -x -e target -e link -e fifo -e dir -e err)" ]

# models_field URL KEY: a field of /v1/models' one model
models_field() {
  curl -sf --max-time 60 "$1/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0][sys.argv[1]])' "$2"
}
# serve_log: what the last start_serve printed (its output file is its own)
serve_log() { ls -t "$E2E_TMP"/serve.* | head -1; }

"$CALIPER" serve --preset tiny --export-gguf tiny.gguf 2>"$T/err"
want=$(sed -n 's/.*(tiny, \([0-9]*\) params.*/\1/p' "$T/err")
check "the export says its parameter count ($want)" [ -n "$want" ]
if start_serve --model tiny.gguf; then
  got=$(models_field "$SERVE_URL" params)
  check "the export served back counts the preset's parameters ($got = $want)" [ "$got" = "$want" ]
  check "the listening line says so too" grep -q "model tiny.gguf, $want params" "$(serve_log)"
  check "an F32 file is held as stored, and serve says so" \
    grep -q "weights held as stored: F32 100 %;" "$(serve_log)"
  kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
else not_ok "serve --model tiny.gguf starts"; fi

# A quantized file's matrices are held as stored, each in its own format
# (a Q4_K_M file: Q4_K and Q6_K), and the startup line names them with
# their shares, the bytes held beside the file's and the KV cache; --dtype
# converts, and the line says what was widened or rounded.
"$CALIPER" serve --preset tiny --dim 256 --ffn 512 --heads 4 --kv-heads 2 --layers 2 \
  --export-gguf mix.gguf --dtype q4_k_m 2>"$T/err"
for d in stored f32 q4_k; do
  if start_serve --model mix.gguf $([ $d != stored ] && echo --dtype $d); then
    line=$(grep "weights held as" "$(serve_log)")
    echo "# $d: $line"
    case $d in
    stored)
      check "Q4_K_M served as stored: the file's types and shares named" \
        grep -qE "held as stored: Q4_K [0-9]+ %, Q6_K [0-9]+ %; " <<<"$line"
      held=$(sed -n 's/.*; \([0-9.]*\) MB held for a \([0-9.]*\) MB file, KV cache .* reserved (16 sequences of 512 positions.*/\1 \2/p' <<<"$line")
      check "... with the bytes held, within 1.05x of the file's ($held MB)" python3 -c '
import sys; h, f = map(float, sys.argv[1:3]); assert 0.5 * f < h <= 1.05 * f' $held
      check "... and the profile names both formats" \
        grep -q '"dtype": "q4_k+q6_k"' <(curl -sf --max-time 60 "$SERVE_URL/profile");;
    f32)
      check "Q4_K_M served in F32 by --dtype: widened exactly, the file's types and shares named" \
        grep -qE "held as f32 \(--dtype\): Q4_K [0-9]+ %, Q6_K [0-9]+ % widened exactly;" <<<"$line";;
    q4_k)
      check "Q4_K_M served in Q4_K by --dtype: the Q6_K share is said to be rounded" \
        grep -qE "held as q4_k \(--dtype\): Q4_K [0-9]+ % as stored; Q6_K [0-9]+ % rounded to q4_k;" <<<"$line";;
    esac
    kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
  else not_ok "serve --model mix.gguf ($d) starts"; fi
done

# qwen3moe: experts with qwen3's head norms, served back from its file and
# answering; experts under a dense architecture are refused by name
"$CALIPER" serve --preset moe --arch qwen3moe --dim 256 --ffn 256 --layers 2 --vocab 512 \
  --export-gguf q3moe.gguf 2>"$T/err"
check "a qwen3moe file is written" grep -q "qwen3moe)" "$T/err"
if start_serve --model q3moe.gguf; then
  out=$(curl -sf --max-time 120 "$SERVE_URL/v1/completions" -H 'Content-Type: application/json' \
        -d '{"prompt":"hello","max_tokens":4,"temperature":0}')
  check "serve --model answers from a qwen3moe file" python3 -c '
import json, sys; d = json.loads(sys.argv[1]); assert d["usage"]["completion_tokens"] >= 1' "$out"
  kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
else not_ok "serve --model q3moe.gguf starts"; fi
"$CALIPER" serve --preset moe --arch qwen3 --export-gguf dense.gguf >/dev/null 2>"$T/err"; rc=$?
check "--arch qwen3 with experts exits 2 (rc $rc)" [ "$rc" -eq 2 ]
check "and says qwen3 is dense here" grep -q -- "--arch: qwen3 is dense here" "$T/err"

# a file's tokenizer.chat_template: a family caliper renders is used (and
# /apply-template shows it), another is refused naming --chat-template
printf '%s' "{{ '<|im_start|>system\\nYou are a helpful assistant<|im_end|>\\n' }}<|im_start|>" >chatml.jinja
python3 "$root/tests/compat/gguf_set_template.py" tiny.gguf chatml.jinja chatml.gguf
if start_serve --model chatml.gguf; then
  check "serve names the file's template" grep -q "chat template chatml (the file's tokenizer.chat_template)" "$(serve_log)"
  out=$(curl -sf --max-time 60 "$SERVE_URL/apply-template" -d '{"messages":[{"role":"user","content":"hi"}]}')
  check "/apply-template renders it, default system message included" python3 -c '
import json, sys
assert json.loads(sys.argv[1])["prompt"] == "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"' "$out"
  kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
else not_ok "serve --model chatml.gguf starts"; fi
printf '%s' "<start_of_turn>user" >gemma.jinja
python3 "$root/tests/compat/gguf_set_template.py" tiny.gguf gemma.jinja gemma.gguf
timeout 120 "$CALIPER" serve --model gemma.gguf --port 0 >/dev/null 2>"$T/err"; rc=$?
check "an unknown chat template is refused (rc $rc)" [ "$rc" -eq 1 ]
check "naming the fallback flag" grep -q -- "serve it with --chat-template" "$T/err"
timeout 60 "$CALIPER" serve --preset tiny --chat-template jinja >/dev/null 2>"$T/err"; rc=$?
check "--chat-template jinja is a usage error (rc $rc)" [ "$rc" -eq 2 ]

# the same 7 MB file with context_length 1048576 (the u32 after the key)
python3 - tiny.gguf long.gguf <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
k = b"llama.context_length"
i = b.index(k) + len(k)
assert struct.unpack_from("<I", b, i)[0] == 4            # uint32
struct.pack_into("<I", b, i + 4, 1048576)
open(sys.argv[2], "wb").write(b)
PY
if start_serve --model long.gguf; then
  check "context_length 1048576 is held to 4096 positions" [ "$(models_field "$SERVE_URL" max_model_len)" = 4096 ]
  check "serve says what the full context would cost and what it chose" \
    grep -q "context_length 1048576 would take 34359738368 bytes (34.4 GB) of KV cache for 16 sequences; serving 4096 positions, 134217728 bytes (134 MB) (--context N to choose)" "$(serve_log)"
  kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
else not_ok "serve --model long.gguf starts"; fi
if start_serve --model long.gguf --context 8192 --max-batch 2; then
  check "--context 8192 raises it" [ "$(models_field "$SERVE_URL" max_model_len)" = 8192 ]
  check "the KV cache of 2 x 8192 positions is named, and no more" \
    [ "$(grep -ci 'KV cache' "$(serve_log)")" = 1 ] && grep -q "2 sequences of 8192 positions" "$(serve_log)"
  kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
else not_ok "serve --model long.gguf --context 8192 starts"; fi

finish
