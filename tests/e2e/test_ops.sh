#!/usr/bin/env bash
# caliper ops end to end: real per-op profiles of `caliper serve` (tiny at
# 1 and 2 threads, tiny against moe) from small real runs, reconciled; each
# side's categories add up to its end to end within its coverage, and that
# end to end is checked against the run's own tokens and wall time; the
# single-op trap on the moe preset (the op bench against the in-graph
# profile); the report section; usage errors.
. "$(dirname "$0")/lib.sh"
T=$E2E_TMP

# profile PRESET THREADS NAME: serve, one small closed-loop run, stop; the
# profile lands in $T/NAME.json and the run in $T/NAME.run.json
profile() {
  start_serve --preset "$1" --threads "$2" --max-batch 1 --profile "$T/$3.json" || return 1
  "$CALIPER" run --url "$SERVE_URL" --prompt-tokens 8 --max-tokens 24 --requests 3 \
    --no-telemetry --db "$T/r.db" --json "$T/$3.run.json" --label "$3" >"$T/$3.run.out" 2>&1
  local rc=$?
  kill -TERM "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
  [ $rc -eq 0 ] && [ -s "$T/$3.json" ]
}

check "tiny, 1 thread: run and profile" profile tiny 1 t1
check "tiny, 2 threads: run and profile" profile tiny 2 t2
check "moe, 1 thread: run and profile" profile moe 1 m1

"$CALIPER" ops "$T/t1.json" "$T/t2.json" --what-if attention=2x >"$T/ops.txt" 2>&1
check "ops A B prints the table" grep -q "^dense_proj " "$T/ops.txt"
check "ops A B prints calls, bytes and GB/s columns" \
  grep -q "A calls/tok" "$T/ops.txt"
check "ops A B prints coverage and ceiling per engine" \
  bash -c "grep -q '^- A: coverage 0\.[0-9]*' '$T/ops.txt' && grep -q '^- B: coverage' '$T/ops.txt' && grep -q 'would give at most' '$T/ops.txt'"
check "ops A B prints the sorted gap and the biggest" \
  bash -c "grep -q '^- where the gap is' '$T/ops.txt' && grep -q '^- the biggest gap is' '$T/ops.txt'"
check "ops A B prints the what-if for both" \
  bash -c "[ \$(grep -c '^- what if attention ran 2x faster' '$T/ops.txt') -eq 2 ]"

# The figures: per side, categories + outside = end to end, kernels ÷ end to
# end = coverage, ceiling = 1/(1-coverage); the profile's tokens are the
# run's (prompt + output − one per request: the last token needs no step);
# the engine's busy time fits inside the run's wall time; the same workload
# dispatches the same calls at 1 and 2 threads.
"$CALIPER" ops "$T/t1.json" "$T/t2.json" --json -o "$T/ops.json"
check "ops --json is consistent with itself and with each run" python3 - "$T" <<'EOF'
import json, sys, math
T = sys.argv[1]
d = json.load(open(T + "/ops.json"))
assert d["format"] == "caliper.ops/1"
for s, name in zip(d["sides"], ["t1", "t2"]):
    cats = s["categories"]
    k = sum(c["ms_per_token"] for c in cats if c["present"])
    assert abs(k - s["kernel_ms_per_token"]) < 1e-9 * max(1, k), (k, s)
    assert abs(k + s["outside_ms_per_token"] - s["e2e_ms_per_token"]) < 1e-9 * max(1, k)
    assert abs(k / s["e2e_ms_per_token"] - s["coverage"]) < 1e-9
    assert 0 < s["coverage"] <= 1
    if s["ceiling"] is not None:
        assert abs(s["ceiling"] - 1 / (1 - s["coverage"])) < 1e-6 * s["ceiling"]
    prof = json.load(open("%s/%s.json" % (T, name)))
    run = json.load(open("%s/%s.run.json" % (T, name)))
    cells = run["cells"]
    tin = sum(c["total_input_tokens"] for c in cells)
    tout = sum(c["total_output_tokens"] for c in cells)
    done = sum(c["completed"] for c in cells)
    assert s["tokens"] == prof["tokens"] == tin + tout - done, (s["tokens"], tin, tout, done)
    samp = [o["time_ns"] for o in prof["ops"] if o["op"] == "sampling"][0]
    assert s["e2e_ns"] == prof["step_time_ns"] + samp
    wall = sum(c["duration"] for c in cells)
    assert 0 < s["e2e_ns"] * 1e-9 <= wall, (s["e2e_ns"], wall)
    # the engine's own coverage: 1 - unattributed / step time, sampling aside
    own = 1 - prof["unattributed_ns"] / prof["step_time_ns"]
    mine = (s["kernel_ms_per_token"] * s["tokens"] * 1e6 - samp) / prof["step_time_ns"]
    assert abs(own - mine) < 1e-6, (own, mine)
a, b = d["sides"]
# the same steps dispatch the same calls (a prompt's nonce line can tokenize
# one token longer, so the steps, not the tokens, are the common unit)
pa, pb = (json.load(open("%s/%s.json" % (T, n))) for n in ("t1", "t2"))
for ca, cb in zip(a["categories"], b["categories"]):
    if pa["steps"] == pb["steps"]:
        assert ca["calls"] == cb["calls"], (ca, cb)
    if ca["present"] and ca["category"] in ("dense_proj", "attention"):
        assert ca["bytes_per_token"] > 0 and ca["GBps"] > 0 and ca["GFLOPps"] > 0
g = d["gap"]
assert abs(g["total_ms_per_token"] - (a["e2e_ms_per_token"] - b["e2e_ms_per_token"])) < 1e-9
assert abs(g["kernel_ms_per_token"] + g["outside_ms_per_token"] - g["total_ms_per_token"]) < 1e-9
by = [abs(x["ms_per_token"]) for x in g["by_category"]]
assert by == sorted(by, reverse=True)
assert g["biggest"].startswith("the biggest gap is ")
EOF

# tokens and end to end from the stored run instead: the wall time, so the
# HTTP and scheduling time shows up outside every kernel
"$CALIPER" ops "$T/t1.json" --run t1 --db "$T/r.db" --json -o "$T/run.json"
check "--run takes the run's tokens and wall time" python3 - "$T" <<'EOF2'
import json, sys
T = sys.argv[1]
s = json.load(open(T + "/run.json"))["sides"][0]
cells = json.load(open(T + "/t1.run.json"))["cells"]
assert s["tokens"] == sum(c["total_input_tokens"] + c["total_output_tokens"] for c in cells)
assert abs(s["e2e_ns"] - 1e9 * sum(c["duration"] for c in cells)) < 1e3
prof = json.load(open(T + "/t1.json"))
assert s["outside_ms_per_token"] * s["tokens"] * 1e6 >= prof["unattributed_ns"]
EOF2

# dense against MoE: the MoE category only on B, and it holds time there
"$CALIPER" ops "$T/t1.json" "$T/m1.json" --json -o "$T/dm.json"
check "dense vs moe: moe only on B, with time, and every side adds up" python3 - "$T/dm.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
a, b = d["sides"]
moe = d["categories"].index("moe")
assert not a["categories"][moe]["present"] and b["categories"][moe]["present"]
assert b["categories"][moe]["ms_per_token"] > 0 and b["categories"][moe]["calls_per_token"] > 0
for s in d["sides"]:
    k = sum(c["ms_per_token"] for c in s["categories"] if c["present"])
    assert abs(k + s["outside_ms_per_token"] - s["e2e_ms_per_token"]) < 1e-9 * max(1, k)
EOF

# The single-op trap on moe: each op alone at one token per call (the run is
# decode steps of one token but for three prompt chunks of 8)
"$CALIPER" serve --preset moe --threads 1 --op-bench "$T/ob.json" --op-bench-reps 10 --op-bench-pos 16 >"$T/ob.out"
check "serve --op-bench writes the op bench" grep -q "^caliper serve: op bench of moe .* written to" "$T/ob.out"
"$CALIPER" ops "$T/m1.json" "$T/ob.json" >"$T/trap.txt" 2>&1
check "ops sets the op bench against the in-graph profile" \
  bash -c "grep -q '^the single-op trap' '$T/trap.txt' && grep -q '^moe_experts ' '$T/trap.txt' && grep -q '^MoE block ' '$T/trap.txt'"
"$CALIPER" ops "$T/m1.json" --isolated "$T/ob.json" --json -o "$T/trap.json"
check "the trap's figures hold together" python3 - "$T/trap.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))["trap"]
rows = {r["op"]: r for r in t["ops"]}
for r in rows.values():
    assert r["graph_call_ns"] > 0 and r["iso_call_ns"] > 0
    assert abs(r["undercount"] - (1 - r["iso_call_ns"] / r["graph_call_ns"])) < 1e-8
blk = rows["MoE block"]
assert abs(blk["graph_call_ns"] - rows["moe_router"]["graph_call_ns"] - rows["moe_experts"]["graph_call_ns"]) < 1e-8 * blk["graph_call_ns"]
assert t["moe_undercount"] == blk["undercount"]
assert t["iso_tokens_per_call"] == 1
print("# measured: the MoE block alone %.1f us, in the graph %.1f us per layer: undercount %.1f %%"
      % (blk["iso_call_ns"] / 1e3, blk["graph_call_ns"] / 1e3, blk["undercount"] * 100))
EOF

# the report section from the JSON: bars for both sides and the coverage line
"$CALIPER" report --ops "$T/ops.json" latest --db "$T/r.db" -o "$T/r.html" 2>/dev/null
check "report --ops draws the per-op section" \
  bash -c "grep -q '<section class=\"ops\"' '$T/r.html' && [ \$(grep -o 'class=\"bar\" data-side=\"1\"' '$T/r.html' | wc -l) -ge 3 ] && grep -q 'coverage 0\.' '$T/r.html' && grep -q 'id=\"run-0\"' '$T/r.html'"

# bandwidth: measured here, then each category's share of it
"$CALIPER" ops "$T/t1.json" --measure-bandwidth >"$T/bw.txt" 2>/dev/null
check "--measure-bandwidth sets GB/s against the copy" \
  bash -c "grep -q 'measured here' '$T/bw.txt' && grep -qE '^dense_proj .*[0-9]+%' '$T/bw.txt'"

# usage and failures
"$CALIPER" ops >/dev/null 2>&1; check "no profile: exit 2" [ $? -eq 2 ]
"$CALIPER" ops "$T/t1.json" --what-if attention >/dev/null 2>&1; check "--what-if without =: exit 2" [ $? -eq 2 ]
"$CALIPER" ops "$T/t1.json" --what-if warp=2x >/dev/null 2>&1; check "--what-if on no category: exit 2" [ $? -eq 2 ]
"$CALIPER" ops "$T/nope.json" >/dev/null 2>&1; check "a missing file: exit 1" [ $? -eq 1 ]
printf 'op,calls,time_ms\nMUL_MAT,1,1\n' >"$T/n.csv"
"$CALIPER" ops "$T/n.csv" 2>"$T/err.txt" >/dev/null; rc=$?
check "a CSV without tokens: exit 1, says --tokens" bash -c "[ $rc -eq 1 ] && grep -q -- '--tokens' '$T/err.txt'"
"$CALIPER" ops "$T/n.csv" --tokens 10 --e2e 2ms >"$T/n.txt"
check "--tokens and --e2e supply them" grep -q "coverage 0.500" "$T/n.txt"
finish
