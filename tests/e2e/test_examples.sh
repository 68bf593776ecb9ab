#!/usr/bin/env bash
# examples/ against an installed caliper: `make install PREFIX=<tmp>`, build
# examples/inproc_engine.c with nothing but `pkg-config --cflags --libs
# caliper caliper-engine`, run it (in-process shots both ways: the callback
# target and the recorder), and check that `caliper show` and `caliper
# report --format json` display the stored runs like any other: their
# shots, both throughput columns and the verdicts.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
root=$(cd "$here/../.." && pwd)
T=$E2E_TMP
P=$T/prefix
DB=$T/ex.db
: "${BUILD:=$root/build}"

# the build directory's sanitizer, so install relinks nothing differently
san=
case "$(basename "$BUILD")" in
  asan) san=address ;; ubsan) san=undefined ;; tsan) san=thread ;;
esac
if make -C "$root" --no-print-directory install PREFIX="$P" BUILD="$BUILD" ${san:+SAN=$san} \
     >"$T/install.log" 2>&1; then
  ok "make install PREFIX=<tmp> succeeds"
else
  not_ok "make install PREFIX=<tmp> succeeds: $(tail -5 "$T/install.log")"
fi
check "the prefix has caliper.pc and caliper-engine.pc" \
  test -f "$P/lib/pkgconfig/caliper.pc" -a -f "$P/lib/pkgconfig/caliper-engine.pc"
check "the prefix has the run, recorder and engine headers" \
  test -f "$P/include/caliper/run.h" -a -f "$P/include/caliper/recorder.h" -a -f "$P/include/caliper/engine.h"

export PKG_CONFIG_PATH=$P/lib/pkgconfig
flags=$(pkg-config --cflags --libs caliper caliper-engine 2>"$T/pc.err")
check "pkg-config knows caliper and caliper-engine" [ -n "$flags" ]
# shellcheck disable=SC2086
if cc -std=c11 -O1 -Wall -Wextra -Werror "$root/examples/inproc_engine.c" -o "$T/inproc_engine" \
     $flags >"$T/cc.log" 2>&1; then
  ok "the example builds from the installed prefix alone"
else
  not_ok "the example builds from the installed prefix alone: $(head -5 "$T/cc.log")"
fi
check "it includes nothing from the source tree" \
  bash -c "! grep -q -- '-I$root' <<<'$flags'"

"$T/inproc_engine" "$DB" 4 >"$T/ex.out" 2>"$T/ex.err"
rc=$?
if [ $rc -eq 0 ]; then ok "the example runs both ways and exits 0"
else not_ok "the example runs both ways and exits 0 (rc $rc): $(tail -3 "$T/ex.err")"; fi
check "it stored the callback run" grep -q "^callback: run 1, 8 cells, status ok" "$T/ex.out"
check "it stored the recorder run" grep -q "^recorder: run 2, 4 shots" "$T/ex.out"

q() { sqlite3 "$DB" "$1"; }
check "both runs are finished ok with every request accounted for" \
  [ "$(q "select count(*) from runs where status='ok'")" = 2 -a \
    "$(q "select count(*) from cells where n_requests <> completed + failed")" = 0 ]
check "the callback run has 4 shots x 2 concurrencies, shot 1 cold" \
  [ "$(q "select group_concat(shot_kind) from (select shot_kind from cells where run_id=1 and concurrency=1 order by seq)")" = "cold,warm,warm,warm" ]
check "every request kept its token times" \
  [ "$(q "select count(*) from requests where status='ok' and (chunks is null or n_chunks <> 16)")" = 0 ]

for label in inproc-callback inproc-recorder; do
  "$CALIPER" show --db "$DB" "$label" >"$T/show.$label" 2>&1
  check "show $label exits 0" [ $? -eq 0 ]
  check "show $label names the in-process engine" grep -q "target: in-process" "$T/show.$label"
  check "show $label has a shots table with both columns" \
    grep -q "aggregate tok/s  per-request tok/s" "$T/show.$label"
  check "show $label lists shots 1-4" \
    bash -c "[ \$(grep -cE '^[1-4] +(cold|warm) ' '$T/show.$label') -ge 4 ]"
  # a steady engine on a busy machine may rightly get "cannot judge" (the
  # warm shots disagree): either way the series is judged in words
  check "show $label gives the shot-series verdict" grep -qE "^verdict: (shots 2–4 |cannot judge: )" "$T/show.$label"
  "$CALIPER" report --db "$DB" --format json "$label" >"$T/rep.$label.json" 2>"$T/rep.err"
  check "report --format json $label exits 0" [ $? -eq 0 ]
  check "report json $label: 4 shots, both columns, verdicts" python3 - "$T/rep.$label.json" <<'EOF'
import json, re, sys
d = json.load(open(sys.argv[1]))
r = d["runs"][0] if isinstance(d, dict) and "runs" in d else d
shots = r.get("shots") or []
assert len(shots) >= 4, "shots: %d" % len(shots)
for s in shots:
    m = s.get("metrics", s)   # the one schema nests a shot's numbers under "metrics"
    keys = [k for k, v in m.items() if isinstance(v, (int, float))]
    assert any(re.search(r"output_throughput|aggregate", k) for k in keys), "aggregate: %r" % s
    assert any(re.search(r"request_tok_s|per_request", k) for k in keys), "per-request: %r" % s
v = r.get("verdicts") or []
assert any(isinstance(x, dict) and x.get("kind") == "shots" and "shot 1" in x.get("text", "")
           for x in v), "a shot-series verdict as data: %s" % json.dumps(v)
EOF
done
# compare reads them as any stored run: a run against itself is 1.00x, and
# the two ways differ in protocol (prompt length, API), which compare names
"$CALIPER" compare --db "$DB" inproc-recorder inproc-recorder >"$T/cmp.self" 2>&1
rc=$?
check "compare: the recorded run against itself gives ratios of 1.00x" \
  bash -c "[ $rc -eq 0 ] && grep -q '1.00×' '$T/cmp.self' && grep -q ' 0 pairs refused' '$T/cmp.self'"
"$CALIPER" compare --db "$DB" inproc-callback inproc-recorder >"$T/cmp.both" 2>&1
check "compare: the two ways are named as different protocols" \
  grep -q "not comparable: prompt length 48 tok vs" "$T/cmp.both"

# ---- the default plan from a program is the CLI's default ------------------
# examples/default_plan.c runs cal_run_plan_default() against a served
# built-in engine; `caliper run --url` with no shot flags runs the same
# target. Their stored protocols must agree on every key but the seed (the
# CLI draws one) and the CLI's transport keys (API name, body, timeouts,
# connect-ahead, the series' noise prior), and their targets on all but the
# load time: if cal_run_plan_default() and the CLI's defaults diverged
# (shots, warm-up, rest, cell, lengths, output policy, floors), this fails
# naming the key.
# shellcheck disable=SC2086
if cc -std=c11 -O1 -Wall -Wextra -Werror "$root/examples/default_plan.c" -o "$T/default_plan" \
     $(pkg-config --cflags --libs caliper) >"$T/cc2.log" 2>&1; then
  ok "examples/default_plan.c builds from the installed prefix alone"
else
  not_ok "examples/default_plan.c builds from the installed prefix alone: $(head -5 "$T/cc2.log")"
fi
if start_serve --preset tiny; then
  DB2=$T/default.db
  "$CALIPER" run --url "$SERVE_URL" --no-telemetry --db "$DB2" >"$T/cli.out" 2>&1
  check "caliper run with no shot flags stores run 1" [ $? -eq 0 ]
  "$T/default_plan" "$SERVE_URL" "$DB2" >"$T/dp.out" 2>"$T/dp.err"
  check "the default-plan program stores run 2" grep -q "^default plan: run 2, .* status ok" "$T/dp.out"
  check "the stored protocol of cal_run_plan_default() equals caliper run's defaults" \
    python3 - "$DB2" <<'EOF'
import json, sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("select protocol, target from runs order by id").fetchall()
assert len(rows) == 2, "runs: %d" % len(rows)
(pc, tc), (pl, tl) = [(json.loads(p), json.loads(t)) for p, t in rows]
cli_only = {"seed", "api", "body", "connect_timeout_s", "idle_timeout_s", "request_timeout_s",
            "connect_ahead", "loops", "noise_prior"}
# what the defaults are made of must be there to be compared at all
for k in ("shots", "warmup", "rest_s", "concurrency", "prompt_tokens", "max_tokens",
          "output_policy", "content", "noise_floor", "equivalence", "keep_chunks"):
    assert k in pc and k in pl, "key %s missing: cli %r, library %r" % (k, k in pc, k in pl)
bad = ["protocol.%s: caliper run %s, cal_run_plan_default %s" % (k, json.dumps(pc.get(k)), json.dumps(pl.get(k)))
       for k in sorted(set(pc) | set(pl)) if k not in cli_only and pc.get(k) != pl.get(k)]
bad += ["target.%s: caliper run %s, library %s" % (k, json.dumps(tc.get(k)), json.dumps(tl.get(k)))
        for k in sorted(set(tc) | set(tl)) if k != "load_s" and tc.get(k) != tl.get(k)]
if bad:
    print("\n".join(bad)); sys.exit(1)
EOF
else
  not_ok "serve starts for the default-plan check"
fi
finish
