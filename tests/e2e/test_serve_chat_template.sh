# A GGUF file's tokenizer.chat_template as serve --model reads it, each odd
# case with its true message or handled whole: a 0-byte template and one
# starting with NUL were refused as "over 262144 bytes"; a ChatML default
# system message over 511 bytes was cut silently; one that is not UTF-8
# made /apply-template answer without a "prompt" key.
source "$(dirname "$0")/lib.sh"
need python3 "chat template checks" || finish
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$E2E_TMP"
T=$E2E_TMP
"$CALIPER" serve --preset tiny --export-gguf tiny.gguf >/dev/null 2>"$T/err" \
  || { not_ok "export"; cat "$T/err"; finish; }

# with_template NAME: NAME.gguf from NAME.jinja; refused NAME MESSAGE
with_template() { python3 "$root/tests/compat/gguf_set_template.py" tiny.gguf "$1.jinja" "$1.gguf"; }
refused() {
  timeout 120 "$CALIPER" serve --model "$1.gguf" --port 0 >/dev/null 2>"$T/$1.err"; local rc=$?
  check "$1: refused (rc $rc) with \"$2\"" \
    sh -c "[ $rc -eq 1 ] && grep -qF -- '$2' '$T/$1.err' && grep -qF -- '--chat-template' '$T/$1.err'"
  grep -qF -- "$2" "$T/$1.err" || cat "$T/$1.err"
}

: >empty.jinja
with_template empty
refused empty "tokenizer.chat_template: it is empty (0 bytes)"
printf '\0{{ x }}<|im_start|>' >nul.jinja
with_template nul
refused nul "tokenizer.chat_template: byte 0 of its 20 is NUL: a template is text"
printf '<|im_start|>\xff' >bad.jinja
with_template bad
refused bad "tokenizer.chat_template: byte 12 of its 13 is not UTF-8: a template is text"
python3 -c 'import sys; sys.stdout.write("<|im_start|>" + "x" * 300000)' >huge.jinja
with_template huge
refused huge "tokenizer.chat_template: it is 300012 bytes, over the 262144 caliper reads"
# a default system message that is not UTF-8 (a Latin-1 e-acute)
printf "{{ '<|im_start|>system\\\\nCaf\xe9<|im_end|>\\\\n' }}<|im_start|>" >sysbad.jinja
with_template sysbad
refused sysbad "tokenizer.chat_template: byte 27 of its 56 is not UTF-8"
python3 -c 'import sys; sys.stdout.write("{{ \x27<|im_start|>system\\n" + "y" * 5000 + "<|im_end|>\\n\x27 }}<|im_start|>")' >syslong.jinja
with_template syslong
refused syslong "its default system message is 5000 bytes, over the 4095 caliper holds"

# 600 bytes of default system message are rendered whole
python3 -c 'import sys; sys.stdout.write("{{ \x27<|im_start|>system\\n" + "z" * 599 + ".<|im_end|>\\n\x27 }}<|im_start|>")' >sys600.jinja
with_template sys600
if start_serve --model sys600.gguf; then
  out=$(curl -s --max-time 60 "$SERVE_URL/apply-template" -d '{"messages":[{"role":"user","content":"hi"}]}')
  check "a 600-byte default system message is rendered whole" python3 -c '
import json, sys
p = json.loads(sys.argv[1])["prompt"]
assert p == "<|im_start|>system\n" + "z" * 599 + ".<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", p[:80]' "$out"
  kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
else not_ok "serve --model sys600.gguf starts"; fi
finish
