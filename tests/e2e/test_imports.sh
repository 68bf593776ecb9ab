# Imports from other tools' result files (golden files written from their
# documented formats, tests/data/imports/): llama-bench -o json and -o jsonl,
# AIPerf and GenAI-Perf profile exports, a guidellm report. Each reads with
# the numbers it holds, sits beside a caliper run in `compare` with the
# protocol fields that differ named and no ratio, renders in `report`, and a
# file missing what the importer needs is refused with the field named.
source "$(dirname "$0")/lib.sh"
DATA=$(cd "$(dirname "$0")/../data/imports" && pwd)
cd "$E2E_TMP"
DB="$E2E_TMP/i.db"
"$CALIPER" run --preset tiny --prompt-tokens 128 --max-tokens 8 --requests 4 --db "$DB" \
  --label A --seed 3 >run.out 2>run.err
rc=$?
[ $rc -le 1 ] && grep -q '^stored: run' run.out && ok "caliper run A" \
  || { not_ok "run A (exit $rc)"; tail -5 run.out run.err; finish; }

# llama-bench: prefill and decode read from the pp and tg tests
"$CALIPER" report --import llama-bench "$DATA/llama-bench.json" --format md >lb.md 2>lb.err
rc=$?
[ $rc -eq 0 ] && ok "report --import llama-bench: exit 0" || { not_ok "report llama-bench: $rc"; cat lb.err; }
grep -q '10240' lb.md && ok "llama-bench: pp128 prefill 10240 tok/s read" || { not_ok "llama-bench prefill"; cat lb.md; }
grep -q '800' lb.md && ok "llama-bench: tg32 decode 800 tok/s read" || not_ok "llama-bench decode"
"$CALIPER" report --import llama-bench "$DATA/llama-bench.jsonl" --format md >lbl.md 2>&1 \
  && grep -q '10240' lbl.md && ok "llama-bench -o jsonl reads the same" || { not_ok "jsonl"; cat lbl.md; }
"$CALIPER" report --import llama-bench "$DATA/llama-bench-one.jsonl" --format md >lb1.md 2>&1 \
  && grep -q '10240' lb1.md && ok "llama-bench -o jsonl with one test (one line)" || { not_ok "one-line jsonl"; cat lb1.md; }

# absurd but finite values are refused by field and test, never clamped or
# printed as a 300-digit ratio
lb_bad() {  # NAME JQ-LIKE-SED EXPECTED-MESSAGE
  sed "$2" "$DATA/llama-bench.jsonl" >lbbad.jsonl
  "$CALIPER" report --import llama-bench lbbad.jsonl --format md >lbbad.md 2>lbbad.err; local rc=$?
  if [ $rc -ne 0 ] && grep -qF -- "$3" lbbad.err; then ok "llama-bench $1 refused, named"
  else not_ok "llama-bench $1: exit $rc"; cat lbbad.err lbbad.md | head -5; fi
}
lb_bad "avg_ts 1e308" '1s/"avg_ts": *[0-9.e+]*/"avg_ts": 1e308/' 'test 0: "avg_ts" is 1e308: not a rate in (0, 1e+07] tokens/s'
lb_bad "n_gen 2^62" '2s/"n_gen": *[0-9]*/"n_gen": 4611686018427387904/' 'test 1: "n_gen" is 4611686018427387904: not a whole number of tokens in [0, 1e+09]'
lb_bad "n_prompt 2.5" '1s/"n_prompt": *[0-9]*/"n_prompt": 2.5/' 'test 0: "n_prompt" is 2.5: not a whole number'
lb_bad "avg_ts 0" '1s/"avg_ts": *[0-9.e+]*/"avg_ts": 0/' 'test 0: "avg_ts" is 0: not a rate'

# Must show: a llama-bench result beside a caliper run, no ratio, the
# differing protocol fields named
"$CALIPER" compare A --import llama-bench "$DATA/llama-bench.json" --db "$DB" >cmp.out 2>cmp.err
rc=$?
[ $rc -eq 1 ] && ok "compare with llama-bench: nothing comparable (exit 1)" || { not_ok "exit $rc"; cat cmp.out cmp.err; }
grep -q 'llama-bench.json' cmp.out && ok "llama-bench column present" || not_ok "llama-bench column"
grep -q 'not comparable:.*streaming' cmp.out && ok "refusal names streaming" || { not_ok "streaming named"; cat cmp.out; }
grep -q 'not comparable:.*API .* vs in-process (no HTTP)' cmp.out && ok "refusal names the API (in-process)" \
  || not_ok "API named"
grep -q 'not comparable:.*probe caliper [0-9.]* vs llama-bench' cmp.out && ok "refusal names the probe" || not_ok "probe named"
if grep -v '^[0-9]* ratio' cmp.out | grep -q '×'; then not_ok "no ratio printed"; else ok "no ratio printed"; fi

# AIPerf and GenAI-Perf
"$CALIPER" report --import aiperf "$DATA/aiperf.json" --format md >ap.md 2>&1 \
  && grep -q '1274' ap.md && grep -q '787' ap.md && ok "aiperf: throughput and TTFT p50 read" \
  || { not_ok "aiperf"; cat ap.md; }
"$CALIPER" report --import genai-perf "$DATA/genai-perf.json" --format json -o gp.json 2>gp.err \
  && grep -q '"probe": "genai-perf"' gp.json && grep -q '"prompt_tokens": 128' gp.json \
  && ok "genai-perf: probe and fixed prompt length carried" || { not_ok "genai-perf"; cat gp.err; head -50 gp.json; }
"$CALIPER" compare A --import aiperf "$DATA/aiperf.json" --db "$DB" >ca.out 2>&1
grep -q 'not comparable:.*concurrency 1 vs 100' ca.out && ok "aiperf: concurrency difference named" \
  || { not_ok "aiperf concurrency"; cat ca.out; }

# guidellm: two benchmarks, two cells
"$CALIPER" report --import guidellm "$DATA/guidellm.json" --format json -o gl.json 2>gl.err \
  && [ "$(grep -c '"probe": "guidellm"' gl.json)" -ge 2 ] && ok "guidellm: one cell per benchmark" \
  || { not_ok "guidellm"; cat gl.err; }
grep -q '"concurrency": 8' gl.json && ok "guidellm: concurrent strategy's streams read as concurrency" \
  || not_ok "guidellm streams"

# refusals name the field; an unknown tool is a usage error listing the tools
echo '[{"n_prompt": 128, "n_gen": 0}]' >lb-bad.json
"$CALIPER" report --import llama-bench lb-bad.json >/dev/null 2>e1; [ $? -eq 1 ] && grep -q '"avg_ts" is missing' e1 \
  && ok "llama-bench without avg_ts: exit 1, named" || { not_ok "lb-bad"; cat e1; }
echo '{"time_to_first_token": {"avg": 1}}' >ap-bad.json
"$CALIPER" report --import aiperf ap-bad.json >/dev/null 2>e2; [ $? -eq 1 ] && grep -q '"request_latency"' e2 \
  && ok "aiperf without request_latency: exit 1, named" || { not_ok "ap-bad"; cat e2; }
echo '{"benchmarks": []}' >gl-bad.json
"$CALIPER" report --import guidellm gl-bad.json >/dev/null 2>e3; [ $? -eq 1 ] && grep -q '"benchmarks"' e3 \
  && ok "guidellm without benchmarks: exit 1, named" || { not_ok "gl-bad"; cat e3; }
"$CALIPER" report --import lmperf x.json >/dev/null 2>e4; [ $? -eq 2 ] && grep -q 'llama-bench, aiperf' e4 \
  && ok "unknown tool: exit 2, the tools listed" || { not_ok "unknown tool"; cat e4; }
finish
