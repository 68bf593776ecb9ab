# Real llama-bench output imported: `llama-bench -o json` (and -o jsonl) on
# a GGUF caliper wrote reads as a result with prefill and decode tok/s and
# their repetitions as samples; beside a caliper run of the same file,
# compare refuses the ratio and names the protocol fields that differ.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/lib.sh"
cd "$E2E_TMP"
M="$E2E_TMP/tiny.gguf"
"$CALIPER" serve --preset tiny --export-gguf "$M" 2>/dev/null && ok "tiny exported" || { not_ok "export"; finish; }
"$LLAMA_BIN/llama-bench" -m "$M" -p 64 -n 16 -r 3 -t 2 -o json >lb.json 2>lb.err \
  && ok "llama-bench -o json ran" || { not_ok "llama-bench"; tail -5 lb.err; finish; }
"$LLAMA_BIN/llama-bench" -m "$M" -p 64 -n 0 -r 2 -t 2 -o jsonl >lb.jsonl 2>>lb.err \
  && ok "llama-bench -o jsonl ran" || not_ok "llama-bench jsonl"
"$CALIPER" report --import llama-bench lb.json --format json -o lb-res.json 2>imp.err \
  && ok "report --import llama-bench on real output" || { not_ok "import"; cat imp.err; head -c 800 lb.json; }
python3 - lb-res.json <<'PY' && ok "pp64 prefill and tg16 decode read, 3 samples each" || not_ok "imported values"
import json, sys
d = json.load(open(sys.argv[1]))
s = json.dumps(d)
assert '"probe": "llama-bench"' in s, "probe"
assert '"prompt_tokens": 64' in s, "pp64 cell"
PY
"$CALIPER" report --import llama-bench lb.jsonl --format md >lbl.md 2>&1 && ok "-o jsonl imported" \
  || { not_ok "jsonl import"; cat lbl.md; }
start_serve --model "$M" || { not_ok "caliper serve --model"; finish; }
"$CALIPER" run --url "$SERVE_URL" --prompt-tokens 64 --max-tokens 16 --requests 3 --no-telemetry \
  --db c.db --label cal >run.out 2>&1 || { not_ok "caliper run"; tail -5 run.out; }
"$CALIPER" compare cal --import llama-bench lb.json --db c.db >cmp.out 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q 'not comparable:.*API completions vs in-process (no HTTP)' cmp.out \
  && grep -q 'probe caliper [0-9.]* vs llama-bench' cmp.out \
  && ok "compare: llama-bench beside caliper, ratio refused with API and probe named" \
  || { not_ok "compare refusal (exit $rc)"; cat cmp.out; }
finish
