# caliper serve with a model's own vocabulary (tests/data/vocab: small cuts
# of llama.cpp's SentencePiece and BPE test vocabularies): --export-gguf
# --vocab FILE writes a model in that vocabulary; serving the file (or the
# preset with --vocab FILE) answers /tokenize with llama.cpp's ids for its
# test texts, /detokenize gives the text back, prompts count BOS where the
# vocabulary adds it; misuse exits 2 naming the flag.
source "$(dirname "$0")/lib.sh"
need python3 "vocabulary checks" || finish
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
V="$ROOT/tests/data/vocab"
cd "$E2E_TMP"

# compare NAME URL: every case of NAME.cases through /tokenize and back
compare() {
  python3 - "$V/$1.cases" "$2" "$1" <<'PY'
import json, sys, urllib.request
cases, url, name = sys.argv[1], sys.argv[2], sys.argv[3]
def post(path, body):
    r = urllib.request.Request(url + path, json.dumps(body).encode(),
                               {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(r))
bad = 0
n = 0
for line in open(cases):
    text, ids = line.rstrip("\n").split("\t")
    text = json.loads(text)
    want = [int(x) for x in ids.split()]
    got = post("/tokenize", {"content": text, "parse_special": False})["tokens"]
    n += 1
    if got != want:
        bad += 1
        print(f"  {name}: {text!r}: got {got} want {want}")
        continue
    back = post("/detokenize", {"tokens": got})["content"]
    # SentencePiece's prefix space stays in the decoded text
    if back != text and back != " " + text:
        bad += 1
        print(f"  {name}: {text!r} decodes to {back!r}")
print(f"{n - bad}/{n}")
sys.exit(1 if bad or n < 40 else 0)
PY
}

for v in llama-spm qwen2; do
  arch=llama; [ $v = qwen2 ] && arch=qwen2
  "$CALIPER" serve --preset tiny --arch $arch --vocab "$V/$v.gguf" --export-gguf "$v.out.gguf" \
    2>"$v.export.err"
  check "$v: --export-gguf --vocab FILE writes the model" [ -s "$v.out.gguf" ]
  start_serve --model "$v.out.gguf" --max-batch 2 || { not_ok "$v: serve --model"; continue; }
  compare $v "$SERVE_URL" >"$v.cmp" 2>&1 && ok "$v: /tokenize gives llama.cpp's ids, /detokenize the text ($(tail -1 $v.cmp))" \
    || { not_ok "$v: /tokenize or /detokenize"; head -20 "$v.cmp"; }
  kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null
done

# the preset served directly in a vocabulary; llama3 adds BOS to prompts
start_serve --preset tiny --vocab "$V/llama-bpe.gguf" --max-batch 2 \
  || { not_ok "serve --preset --vocab"; finish; }
compare llama-bpe "$SERVE_URL" >lb.cmp 2>&1 && ok "llama-bpe: served from --vocab ($(tail -1 lb.cmp))" \
  || { not_ok "llama-bpe via --vocab"; head -20 lb.cmp; }
python3 - "$SERVE_URL" <<'PY' >bos.out 2>&1
import json, sys, urllib.request
url = sys.argv[1]
def post(path, body):
    r = urllib.request.Request(url + path, json.dumps(body).encode(),
                               {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(r))
plain = post("/tokenize", {"content": "Hello world"})["tokens"]
withbos = post("/tokenize", {"content": "Hello world", "add_special": True})["tokens"]
assert len(withbos) == len(plain) + 1 and withbos[1:] == plain, (plain, withbos)
c = post("/v1/completions", {"prompt": "Hello world", "max_tokens": 2, "temperature": 0})
assert c["usage"]["prompt_tokens"] == len(withbos), c["usage"]
# a control token written in the text is one id unless parse_special is off
s = post("/tokenize", {"content": "<|eot_id|>"})["tokens"]
t = post("/tokenize", {"content": "<|eot_id|>", "parse_special": False})["tokens"]
assert len(s) == 1 and len(t) > 1, (s, t)
print("ok")
PY
check "llama-bpe: BOS on prompts and add_special, control tokens parsed" grep -qx ok bos.out \
  || cat bos.out
code=$(curl -s -o det.out -w '%{http_code}' "$SERVE_URL/detokenize" -d '{"tokens":[1,999999]}')
check "/detokenize: an id outside the vocabulary is 400 naming the element" \
  sh -c "[ $code = 400 ] && grep -q 'tokens\[1\]' det.out"
kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null

# an end-of-sequence id outside the vocabulary keeps the family's default,
# as llama.cpp does; serve says so at startup
python3 - "$V/gpt-2.gguf" badeos.gguf <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
k = b.index(b"tokenizer.ggml.eos_token_id") + len("tokenizer.ggml.eos_token_id") + 4
b[k:k + 4] = (99999).to_bytes(4, "little")
open(sys.argv[2], "wb").write(b)
PY
start_serve --preset tiny --vocab "$E2E_TMP/badeos.gguf" --max-batch 1 \
  || { not_ok "serve --vocab with eos out of range"; finish; }
check "an eos id out of range: a startup line says what is used instead" \
  grep -qF "caliper serve: warning: vocabulary: tokenizer.ggml.eos_token_id is 99999, outside 0..358: the gpt2 default 11 is used" $E2E_TMP/serve.*
kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null

"$CALIPER" serve --model llama-spm.out.gguf --vocab "$V/gpt-2.gguf" >/dev/null 2>use.err; rc=$?
check "--model with --vocab FILE: exit 2 naming --vocab" sh -c "[ $rc = 2 ] && grep -q -- '--vocab' use.err"
printf 'not a gguf' >junk.gguf
"$CALIPER" serve --preset tiny --vocab "$E2E_TMP/junk.gguf" --export-gguf x.gguf >/dev/null 2>junk.err; rc=$?
check "--vocab with a file that is not GGUF: exit 2 naming it" sh -c "[ $rc = 2 ] && grep -q 'junk.gguf' junk.err"
# The byte vocabulary past 1,000,000 tokens, as the hardening issue made it
# with caliper's own exporter: id 1000000 is "[1000000]", 9 bytes (once
# written into 8-byte slots). A 2-wide F32 model must export (F32 takes a
# row of any length) and serve it back, reading the widest ids whole.
"$CALIPER" serve --preset tiny --vocab 1000001 --dim 2 --heads 1 --kv-heads 1 --ffn 1 \
  --layers 1 --export-gguf big.gguf >big.out 2>&1
check "a 1,000,001-token byte vocabulary exports at --dim 2" [ -s big.gguf ]
start_serve --model "$E2E_TMP/big.gguf" --max-batch 1 || not_ok "serve --model of a 1,000,001-token byte vocabulary"
det=$(curl -s "$SERVE_URL/detokenize" -d '{"tokens":[1000000,999999,259]}')
check "/detokenize reads the widest ids whole ($det)" \
  sh -c "printf '%s' '$det' | grep -q '\[1000000\]\[999999\]\[259\]'"
kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null
finish
