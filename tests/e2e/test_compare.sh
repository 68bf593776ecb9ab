# caliper compare end to end: two real runs under the same protocol get ratios
# with confidence intervals; two runs that differ only in shot kind get no
# ratio and "shot kind" (cold vs warm) named; --force prints the ratio with the
# difference beside it; a vLLM bench file sits in the table with its
# differences named; stale baselines are flagged; usage errors exit 2.
source "$(dirname "$0")/lib.sh"
cd "$E2E_TMP"
DB="$E2E_TMP/c.db"

run() { # label: one cold shot per cell, c1 and c2, 64-token prompts
  "$CALIPER" run --preset tiny --shots 1 --concurrency 1,2 --prompt-tokens 64 --max-tokens 8 \
    --requests 6 --db "$DB" --label "$1" --seed 11 >"run-$1.out" 2>"run-$1.err"
  local rc=$?
  # exit 1 only says a request failed (counted and stored): the run is usable
  [ $rc -le 1 ] && grep -q '^stored: run' "run-$1.out"
}
run A && ok "run A" || { not_ok "run A"; tail -5 run-A.out run-A.err; finish; }
run B && ok "run B" || { not_ok "run B"; tail -5 run-B.out run-B.err; finish; }

# same protocol: ratios, with CIs where per-request samples exist
"$CALIPER" compare A B --db "$DB" >same.out 2>same.err; rc=$?
[ $rc -eq 0 ] && ok "same protocol: exit 0" || { not_ok "same protocol: exit $rc"; cat same.out same.err; }
grep -q '×' same.out && ok "same protocol: ratios printed" || not_ok "same protocol: ratios"
grep -q '(CI [0-9.]*–[0-9.]*[,)]' same.out && ok "ratios carry a bootstrap CI" || not_ok "CI on the ratio"
grep -q 'per-request tok/s (median) · c2 · 64 tok · cold 1' same.out && ok "rows name their cell" || not_ok "row labels"
if grep -q 'not comparable' same.out; then
  not_ok "same protocol: nothing refused"; grep 'not comparable' same.out | head -5   # which field differed
else ok "same protocol: nothing refused"; fi

# an exported run reads exactly as the stored one
"$CALIPER" export A --db "$DB" --json >A-export.json 2>/dev/null
"$CALIPER" compare A A-export.json --db "$DB" --all >exp.out 2>&1; rc=$?
rows=$(grep -c ' · c[12] · ' exp.out); ones=$(grep -cE '  1\.00×|baseline is 0' exp.out)
[ $rc -eq 0 ] && [ "$rows" -gt 0 ] && [ "$rows" -eq "$ones" ] && ok "export file = stored run ($rows rows at 1.00×)" \
  || { not_ok "export file vs stored run (rc $rc, $rows rows, $ones at 1.00×)"; head -20 exp.out; }

# Must show: two runs that differ only in shot kind
"$CALIPER" report A --db "$DB" --format json -o a.json 2>/dev/null
sed -e 's/"shot_kind": "cold"/"shot_kind": "warm"/' -e 's/"label": "A"/"label": "A-warm"/' a.json >b.json
[ "$(diff a.json b.json | grep -c '^>')" -ge 3 ] && ok "b.json differs from a.json in shot kind and label only" \
  || not_ok "building b.json"
"$CALIPER" compare a.json b.json >kind.out 2>kind.err; rc=$?
[ $rc -eq 1 ] && ok "shot kind differs: exit 1 (nothing comparable)" || not_ok "shot kind differs: exit $rc"
grep -q 'not comparable: shot kind cold vs warm' kind.out && ok "names shot kind (cold vs warm)" \
  || { not_ok "names shot kind"; cat kind.out; }
if grep -v '^[0-9]* ratio' kind.out | grep -q '×'; then not_ok "no ratio printed"; else ok "no ratio printed"; fi
grep -q 'nothing comparable' kind.err && ok "says nothing was comparable" || not_ok "stderr line"

"$CALIPER" compare --force a.json b.json >force.out 2>&1
grep -q '1.00× .*FORCED, differs: shot kind cold vs warm' force.out && ok "--force: ratio with the difference beside it" \
  || { not_ok "--force"; cat force.out; }

# a vLLM bench serve result, in vLLM's own field names (written here)
cat >vllm.json <<'EOF'
{"date": "20251115-101530", "endpoint_type": "openai", "backend": "vllm", "label": null,
 "model_id": "meta-llama/Llama-3.1-8B-Instruct", "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
 "num_prompts": 6, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 2,
 "duration": 1.2, "completed": 6, "failed": 0, "total_input_tokens": 384, "total_output_tokens": 48,
 "request_throughput": 5.0, "request_goodput": null, "output_throughput": 40.0,
 "total_token_throughput": 360.0, "max_output_tokens_per_s": 44.0, "max_concurrent_requests": 2,
 "mean_ttft_ms": 21.0, "median_ttft_ms": 20.5, "std_ttft_ms": 1.2, "p99_ttft_ms": 23.0,
 "mean_tpot_ms": 3.1, "median_tpot_ms": 3.0, "std_tpot_ms": 0.2, "p99_tpot_ms": 3.6,
 "mean_itl_ms": 3.0, "median_itl_ms": 2.9, "std_itl_ms": 0.4, "p99_itl_ms": 4.1,
 "mean_e2el_ms": 42.0, "median_e2el_ms": 41.5, "std_e2el_ms": 2.0, "p99_e2el_ms": 46.0,
 "input_lens": [64, 64, 64, 64, 64, 64], "output_lens": [8, 8, 8, 8, 8, 8],
 "ttfts": [0.020, 0.021, 0.020, 0.022, 0.019, 0.023],
 "itls": [[0.003, 0.003], [0.003, 0.004], [0.003], [0.002, 0.003], [0.003], [0.004]],
 "generated_texts": ["", "", "", "", "", ""], "errors": ["", "", "", "", "", ""]}
EOF
"$CALIPER" compare A --import vllm vllm.json --db "$DB" >vllm.out 2>&1; rc=$?
[ $rc -eq 1 ] && ok "vllm import: nothing comparable (exit 1)" || { not_ok "vllm import: exit $rc"; cat vllm.out; }
grep -q 'vllm.json' vllm.out && ok "vllm import: its column is there" || not_ok "vllm column"
grep -q 'shot kind cold vs mean of consecutive requests, no cold/warm split' vllm.out \
  && ok "vllm import: shot kind named" || { not_ok "vllm shot kind"; cat vllm.out; }
grep -q 'probe caliper [0-9.]* vs vllm bench serve' vllm.out && ok "vllm import: probe named" || not_ok "vllm probe"
grep -q 'TTFT p50 ms · c2 · 64 tok' vllm.out && ok "vllm import: paired with the c2 cell" || not_ok "vllm pairing"

# a stale baseline is flagged
sed -e 's/"created_unix": [0-9]*/"created_unix": 1600000000/' -e 's/"label": "A"/"label": "A-old"/' a.json >old.json
"$CALIPER" compare old.json a.json >stale.out 2>&1
grep -q '^! A-old: measured [0-9]* d ago (older than 30 d)' stale.out && ok "stale baseline flagged" \
  || { not_ok "stale flag"; cat stale.out; }
"$CALIPER" compare --stale 0 old.json a.json >stale0.out 2>&1
grep -q 'd ago' stale0.out && not_ok "--stale 0 never flags" || ok "--stale 0 never flags"

# usage errors: exit 2 with the flag and value named; unknown runs exit 1
"$CALIPER" compare A --db "$DB" >/dev/null 2>u1; [ $? -eq 2 ] && grep -q 'at least two' u1 \
  && ok "one result: exit 2" || not_ok "one result"
"$CALIPER" compare --stale soon A B --db "$DB" >/dev/null 2>u2; [ $? -eq 2 ] && grep -q -- '--stale' u2 \
  && ok "bad --stale: exit 2, named" || not_ok "bad --stale"
"$CALIPER" compare --import lmperf x.json A --db "$DB" >/dev/null 2>u3; [ $? -eq 2 ] && grep -q 'lmperf' u3 \
  && ok "unknown --import tool: exit 2, named" || not_ok "bad --import"
"$CALIPER" compare A nosuch --db "$DB" >/dev/null 2>u4; [ $? -eq 1 ] && grep -q 'nosuch' u4 \
  && ok "unknown run: exit 1, named" || not_ok "unknown run"
echo '{"completed": 1}' >broken.json
"$CALIPER" compare A --import vllm broken.json --db "$DB" >/dev/null 2>u5; [ $? -eq 1 ] && grep -q '"duration" is missing' u5 \
  && ok "broken vllm file: exit 1, the field named" || { not_ok "broken vllm file"; cat u5; }
# --- --now URL: a baseline measured on another engine version is flagged ------
NOWDB="$E2E_TMP/now.db"
if start_serve --preset tiny; then
  U1=$SERVE_URL
  for i in 1 2; do
    "$CALIPER" run --url "$U1" --db "$NOWDB" --requests 3 --max-tokens 8 --prompt-tokens 32 \
      --no-telemetry >/dev/null 2>&1
  done
  kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
  if start_serve --preset tiny --model-name tiny-v2; then
    "$CALIPER" compare --db "$NOWDB" 1 2 --now "$SERVE_URL" >"$E2E_TMP/now.out" 2>&1; rc=$?
    check "--now: runs on the same protocol still compare (exit 0)" [ $rc -eq 0 ]
    check "--now: a baseline of another engine version is flagged with both versions" \
      grep -q "engine version caliper-tiny, but .* now answers as tiny-v2: re-measure" "$E2E_TMP/now.out"
    "$CALIPER" compare --db "$NOWDB" 1 2 --now "$U1" >"$E2E_TMP/now2.out" 2>&1; rc=$?
    check "--now: an engine that does not answer is an error naming the flag (exit 1)" \
      sh -c "[ $rc -eq 1 ] && grep -q -- '--now: \"$U1\"' '$E2E_TMP/now2.out'"
    kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
  else not_ok "--now: second serve did not start"; fi
else not_ok "--now: serve did not start"; fi

finish
