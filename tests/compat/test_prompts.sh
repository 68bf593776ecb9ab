# Exact prompts built by construction (docs/workload.md, "Exact prompts"),
# against llama-server's own tokenizer: 1,000 unique prompts at each of 16,
# 256 and 1,024 tokens, each request's prompt counted by the server itself
# (usage.prompt_tokens), every one exact; and how long the
# whole run took, preparation included.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/lib.sh"
cd "$E2E_TMP"
M="$E2E_TMP/tiny.gguf"
"$CALIPER" serve --preset tiny --context 2048 --export-gguf "$M" 2>export.err && ok "tiny exported" \
  || { not_ok "export"; cat export.err; finish; }
start_llama "$M" -c 8192 -np 4 || { not_ok "llama-server starts"; finish; }

for n in 16 256 1024; do
  t0=$EPOCHREALTIME
  "$CALIPER" run --url "$LLAMA_URL" --prompt-tokens "$n" --max-tokens 1 --requests 1000 \
    --concurrency 4 --shots 1 --no-telemetry --db "$E2E_TMP/p.db" --json "p$n.json" \
    --label "p$n" >"p$n.out" 2>"p$n.err"
  rc=$?
  t1=$EPOCHREALTIME
  if [ $rc -ne 0 ]; then not_ok "$n tokens: exit $rc"; tail -5 "p$n.err"; continue; fi
  python3 - "p$n.json" "$n" <<'PY' >"p$n.check"
import json, sys
d = json.load(open(sys.argv[1])); n = int(sys.argv[2])
c = d["cells"][0]; reqs = c["requests"]
counts = [r["prompt_tokens"] for r in reqs if r["status"] == "ok"]
print(len(reqs), sum(1 for x in counts if x == n), c.get("prompt_exact"))
PY
  read -r total exact flag <"p$n.check"
  check "$n tokens: 1000 requests, all ok" [ "$total" = 1000 ]
  check "$n tokens: every prompt exactly $n by llama-server's count ($exact of $total)" [ "$exact" = 1000 ]
  check "$n tokens: the cell is labelled exact" [ "$flag" = 1 ]
  echo "# $n tokens: 1000 prompts built and measured in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
  grep -h "prompt" "p$n.err" | grep -i "note\|counted\|seam" | head -2 | sed 's/^/# /'
done
finish
