#!/usr/bin/env bash
# One run, one number per field: a stored run gives the identical value for
# every field in `show`, `report --format json`, `export --json` and
# `compare`, and `caliper run`'s own final print is `show`'s. Two runs: a
# multi-shot run over two concurrencies, and a --cold run (every shot a fresh
# process). export --json is the reference; each other output is parsed with
# python3 and checked field by field against it (show at the field's
# decimals, the others exactly).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
T=$E2E_TMP
DB=$T/one.db
COMMON=(--preset tiny --prompt-tokens 48 --max-tokens 10 --requests 3 --db "$DB" --seed 5 --no-telemetry)

run_one() {   # label, extra args...
  local label=$1; shift
  "$CALIPER" run "${COMMON[@]}" --label "$label" "$@" >"$T/$label.run" 2>"$T/$label.err"
  local rc=$?
  if [ $rc -gt 1 ] || ! grep -q '^stored: run' "$T/$label.run"; then
    not_ok "caliper run $label (exit $rc)"; tail -5 "$T/$label.err"; return 1
  fi
  ok "caliper run $label"
}

check_run() {   # label
  local L=$1
  "$CALIPER" show "$L" --db "$DB" >"$T/$L.show" 2>"$T/$L.show.err" || { not_ok "$L: show"; return; }
  "$CALIPER" export "$L" --json --db "$DB" -o "$T/$L.export.json" || { not_ok "$L: export --json"; return; }
  "$CALIPER" report "$L" --format json --db "$DB" -o "$T/$L.report.json" 2>/dev/null || { not_ok "$L: report --format json"; return; }
  "$CALIPER" compare "$L" "$L" --all --no-ci --format json --db "$DB" >"$T/$L.compare.json" 2>/dev/null
  [ -s "$T/$L.compare.json" ] || { not_ok "$L: compare --format json"; return; }
  check "$L: run's final print is show's" cmp -s "$T/$L.run" "$T/$L.show"
  python3 - "$T/$L" <<'PY'
import json, re, sys
base = sys.argv[1]
exp = json.load(open(base + ".export.json"))
rep = json.load(open(base + ".report.json"))
cmpj = json.load(open(base + ".compare.json"))
show = open(base + ".show").read()
schema = {f["key"]: f for f in exp["schema"]}
fails, checked = [], {"report": 0, "compare": 0, "show": 0}

def same(a, b):
    return a == b or (isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= 1e-9 * max(1.0, abs(a)))

for g in exp["summary"]:
    where = "c%d/%d shots %d-%d" % (g["concurrency"], g["prompt_tokens"], g["shots_first"], g["shots_last"])
    # report JSON: the cell of the same configuration and shot range
    cells = [c for c in rep["cells"]
             if c["fingerprint"]["concurrency"] == g["concurrency"]
             and c["fingerprint"]["prompt_tokens"] == g["prompt_tokens"]
             and c["fingerprint"].get("shot_first") == g["shots_first"]
             and c["fingerprint"].get("shot_last") == g["shots_last"]]
    if len(cells) != 1:
        fails.append("%s: report has %d cells for it" % (where, len(cells)))
        continue
    m = cells[0]["metrics"]
    for k in schema:
        v = g.get(k)
        if v is None:
            if k in m: fails.append("%s %s: export null, report %r" % (where, k, m[k]))
            continue
        checked["report"] += 1
        if not same(v, m.get(k)): fails.append("%s %s: export %r, report %r" % (where, k, v, m.get(k)))
    # compare: the row of this metric, cell and shot range; the baseline's value
    for row in cmpj["rows"]:
        if (row["concurrency"], row["prompt_tokens"], row["shot_first"], row["shot_last"]) != \
           (g["concurrency"], g["prompt_tokens"], g["shots_first"], g["shots_last"]):
            continue
        k = row["metric"]
        checked["compare"] += 1
        for e in row["entries"]:
            if not same(g.get(k), e["value"]):
                fails.append("%s %s: export %r, compare %r" % (where, k, g.get(k), e["value"]))
        if row["entries"][1]["ratio"] is not None and abs(row["entries"][1]["ratio"] - 1) > 1e-12:
            fails.append("%s %s: a run against itself has ratio %r" % (where, k, row["entries"][1]["ratio"]))
    # show: the cells table row of this configuration, each column at its decimals
    cols = ["output_throughput", "per_request_output_throughput_median",
            "median_ttft_ms", "p95_ttft_ms", "p99_ttft_ms", "median_itl_ms", "p99_itl_ms",
            "median_tpot_ms", "median_e2el_ms", "p99_e2el_ms"]
    sect = show.split("── cells ", 1)[1]
    rows = [l.split() for l in sect.splitlines()[2:] if re.match(r"^\s+\d", l)]
    row = [r for r in rows if r[0] == str(g["concurrency"]) and r[1] == str(g["prompt_tokens"])]
    if len(row) != 1:
        fails.append("%s: show has %d rows for it" % (where, len(row)))
        continue
    nums = [x for x in row[0][2:] if x != "/"]
    want = []
    for k in cols:
        v = g.get(k)
        want.append("—" if v is None else "%.*f" % (schema[k]["decimals"], v))
    want.append("%d/%d" % (g["completed"], g["failed"]))
    for k, a, b in zip(cols + ["ok/failed"], nums, want):
        checked["show"] += 1
        if a != b: fails.append("%s %s: show %s, export %s" % (where, k, a, b))
    if len(nums) != len(want): fails.append("%s: show row %r" % (where, row[0]))

# every number a verdict carries is the same data in export and report
ve = [(v["kind"], v["text"]) for v in exp["run"]["verdicts"]]
vr = [(v["kind"], v["text"]) for v in rep["verdicts"]]
if ve != vr[:len(ve)]: fails.append("verdicts differ: export %r, report %r" % (ve, vr))
for f in fails: print("# " + f)
print("# checked %(report)d report, %(compare)d compare, %(show)d show values" % checked)
sys.exit(1 if fails or min(checked.values()) == 0 else 0)
PY
  [ $? -eq 0 ] && ok "$L: show, report json, export json and compare agree on every field" \
               || not_ok "$L: show, report json, export json and compare agree on every field"
}

if run_one multi --shots 4 --concurrency 1,2; then
  check_run multi
  # the shots the pool quotes: 2-4 (shot 1 left out), and the report says so
  python3 - "$T/multi.export.json" "$T/multi.report.json" <<'PY'
import json, sys
e, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert all((g["shots_first"], g["shots_last"], g["shots_pooled"]) == (2, 4, 3) for g in e["summary"]), e["summary"]
kinds = sorted((c["fingerprint"]["concurrency"], c["fingerprint"]["shot_first"], c["fingerprint"]["shot_last"]) for c in r["cells"])
assert kinds == [(1, 1, 1), (1, 2, 4), (2, 1, 1), (2, 2, 4)], kinds
shots = [v for v in e["run"]["verdicts"] if v["kind"] == "shots"]
assert len(shots) == 2 and all(v["group"] in (0, 1) and v["cell"] for v in shots), shots
PY
  check "multi: the pool quotes shots 2-4, shot 1 its own cell, a shot verdict per cell" [ $? -eq 0 ]
fi
if run_one cold --shots 3 --cold; then
  check_run cold
  python3 - "$T/cold.export.json" "$T/cold.report.json" <<'PY'
import json, sys
e, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
g = e["summary"][0]
assert (g["shots_first"], g["shots_last"]) == (2, 3), g
assert {c["fingerprint"]["shot_kind"] for c in r["cells"]} == {"cold"}, r["cells"]
assert sorted((c["fingerprint"]["shot_first"], c["fingerprint"]["shot_last"]) for c in r["cells"]) == [(1, 1), (2, 3)]
PY
  check "cold: show and report quote the same cold shots 2-3" [ $? -eq 0 ]
fi
finish
