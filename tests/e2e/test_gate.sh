# caliper gate end to end: real run --ab runs of the paced engine (whose
# slowdown is known exactly: 10 ms a token against 5) exit 1 with every
# bounded metric a regression; the same engine against itself never exits
# 1; the JUnit XML validates against tests/data/gate/junit.xsd (xmllint)
# and its counts agree (python's XML parser); the Markdown renders as one
# GFM table row per metric (cmark-gfm); the JSON reads back (jq); an
# export file gates as the stored run does; separate runs without repeats
# cannot be judged; and malformed input is refused with exit 2, named.
source "$(dirname "$0")/lib.sh"
XSD="$(cd "$(dirname "$0")/../data/gate" && pwd)/junit.xsd"
cd "$E2E_TMP"
DB="$E2E_TMP/g.db"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# one run --ab of two paced engines: ab LABEL PACE_A PACE_B [run flags...]
ab() {
  local label=$1 pa=$2 pb=$3; shift 3
  local p1 p2; p1=$(free_port); p2=$(free_port)
  while [ "$p2" = "$p1" ]; do p2=$(free_port); done
  "$CALIPER" run --ab --launch "$CALIPER serve --pace-ms $pa --port $p1" --url "http://127.0.0.1:$p1" \
    --launch "$CALIPER serve --pace-ms $pb --port $p2" --url "http://127.0.0.1:$p2" \
    --warmup 1 --shots 13 --requests 3 --max-tokens 8 --prompt-tokens 64 --no-telemetry \
    --db "$DB" --label "$label" "$@" >"run-$label.out" 2>"run-$label.err"
}

BOUNDS='decode_tps<-10%,ttft_p50>+20%,itl_p50>+10%'
if ab slower 5 10; then ok "run --ab: paced 5 ms against 10 ms"
else not_ok "run --ab (slower) failed"; tail -3 run-slower.err; finish; fi

# a known regression: exit 1, every metric a regression, near -50 % decode
"$CALIPER" gate slower --db "$DB" --fail "$BOUNDS" --junit j.xml --md m.md --json g.json >gate.out 2>gate.err
rc=$?
[ $rc -eq 1 ] && ok "a 2x slower engine: exit 1" || { not_ok "slower: exit $rc"; cat gate.out gate.err; }
grep -q '^verdict: fail: 3 regressions' gate.out && ok "three regressions named" || not_ok "verdict line"
d=$(jq -r '.cases[] | select(.metric=="decode_tps_median") | .effect' g.json)
python3 -c "import sys; e=float('$d'); sys.exit(0 if -0.53 < e < -0.47 else 1)" \
  && ok "decode tok/s effect near -50 % ($d)" || not_ok "decode effect $d"
[ "$(jq -r '.verdict' g.json)" = fail ] && [ "$(jq -r '.design' g.json)" = paired ] \
  && [ "$(jq '[.cases[] | select(.answer=="regression")] | length' g.json)" = 3 ] \
  && ok "JSON: verdict fail, paired, three regressions" || not_ok "JSON content"
jq -e 'all(.cases[]; .p_worse_holm <= 0.05 and .ci_lo != null and .n >= 10 and .n <= 12)' g.json >/dev/null \
  && ok "JSON: Holm-adjusted p, CI and up to 12 pairs per case" || not_ok "JSON p/CI/n"

# JUnit: the XSD (xmllint), then the counts with python's XML parser
if need xmllint "JUnit against its XSD"; then
  xmllint --noout --schema "$XSD" j.xml 2>xl.err && ok "JUnit validates against junit.xsd" \
    || { not_ok "JUnit XSD"; cat xl.err; }
fi
python3 - j.xml <<'PY' && ok "JUnit: one testcase per metric, failures counted" || not_ok "JUnit counts"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suite = root.find("testsuite")
cases = suite.findall("testcase")
assert root.tag == "testsuites" and len(cases) == 3
assert int(suite.get("tests")) == 3 and int(suite.get("failures")) == 3
assert all(c.find("failure").get("type") == "regression" for c in cases)
assert {c.get("classname") for c in cases} == {"caliper.gate.decode_tps_median",
        "caliper.gate.median_ttft_ms", "caliper.gate.median_itl_ms"}
PY
# Markdown: a GFM table with one row per metric, as GitHub renders it
if need cmark-gfm "the Markdown summary rendered"; then
  cmark-gfm -e table m.md >m.html
  python3 - m.html <<'PY' && ok "Markdown: a table of 3 rows, 7 columns each" || not_ok "Markdown table"
import sys
from html.parser import HTMLParser
class P(HTMLParser):
    def __init__(s): super().__init__(); s.rows=[]; s.tables=0; s.cur=None
    def handle_starttag(s, t, a):
        if t == "table": s.tables += 1
        if t == "tr": s.cur = []
        if t in ("td", "th") and s.cur is not None: s.cur.append("")
    def handle_endtag(s, t):
        if t == "tr": s.rows.append(s.cur); s.cur = None
    def handle_data(s, d):
        if s.cur: s.cur[-1] += d
p = P(); p.feed(open(sys.argv[1]).read())
assert p.tables == 1, p.tables
assert len(p.rows) == 4 and all(len(r) == 7 for r in p.rows), p.rows
assert all(r[6].strip() == "regression" for r in p.rows[1:])
PY
fi

# the same build against itself: exit 0 or 3, never 1 (alpha 0.001: a
# false alarm here would be a 1-in-1000 event, not a flaky test)
if ab same 5 5; then
  "$CALIPER" gate same --db "$DB" --fail "$BOUNDS" --alpha 0.001 >same.out 2>&1; rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 3 ] && ok "the engine against itself: exit $rc, not 1" \
    || { not_ok "A/A exit $rc"; cat same.out; }
else not_ok "run --ab (same) failed"; fi

# an export file gates as the stored run does
"$CALIPER" export slower --json --db "$DB" -o slower.json
"$CALIPER" gate slower.json --fail "$BOUNDS" --format json >gf.json 2>/dev/null; rc=$?
[ $rc -eq 1 ] && [ "$(jq -c '[.cases[].answer]' gf.json)" = "$(jq -c '[.cases[].answer]' g.json)" ] \
  && ok "the export file: the same answers, exit 1" || not_ok "export file gate (exit $rc)"

# --cannot-judge: 3 becomes 0 or 1; too few pairs cannot be judged
ab short 5 5 --shots 4 >/dev/null 2>&1
"$CALIPER" gate short --db "$DB" --fail "$BOUNDS" >short.out 2>&1; rc=$?
[ $rc -eq 3 ] && grep -q 'measure at least' short.out && ok "3 pairs: exit 3, says how many to measure" \
  || { not_ok "short run: exit $rc"; cat short.out; }
"$CALIPER" gate short --db "$DB" --fail "$BOUNDS" --cannot-judge pass >/dev/null 2>&1
[ $? -eq 0 ] && ok "--cannot-judge pass: exit 0" || not_ok "--cannot-judge pass"
"$CALIPER" gate short --db "$DB" --fail "$BOUNDS" --cannot-judge fail --junit jf.xml >/dev/null 2>&1
[ $? -eq 1 ] && grep -q 'type="cannot_judge"' jf.xml && ok "--cannot-judge fail: exit 1, a JUnit failure" \
  || not_ok "--cannot-judge fail"

# separate runs: two single-target runs with no stored repeats cannot be judged
"$CALIPER" run --preset tiny --shots 3 --requests 3 --max-tokens 8 --prompt-tokens 64 --no-telemetry \
  --db "$DB" --label one >/dev/null 2>&1
"$CALIPER" run --preset tiny --shots 3 --requests 3 --max-tokens 8 --prompt-tokens 64 --no-telemetry \
  --db "$DB" --label two >/dev/null 2>&1
"$CALIPER" gate one two --db "$DB" >runs.out 2>&1; rc=$?
[ $rc -eq 3 ] && grep -q '3 or more are needed\|run-to-run noise' runs.out \
  && ok "separate runs without repeats: exit 3, the reason given" || { not_ok "separate runs: exit $rc"; cat runs.out; }
"$CALIPER" report one --format json --db "$DB" -o one.json 2>/dev/null
"$CALIPER" gate one.json two --db "$DB" >rf.out 2>&1; rc=$?
[ $rc -eq 3 ] && grep -q 'a file holds one run' rf.out && ok "a result file: exit 3, no repeats in a file" \
  || { not_ok "result file: exit $rc"; cat rf.out; }

# refusals and usage errors: exit 2, the field or value named
expect2() { # name, pattern, args...
  local name=$1 pat=$2; shift 2
  "$CALIPER" gate "$@" >e.out 2>e.err; local rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$pat" e.err; then ok "$name: exit 2"; else not_ok "$name: exit $rc"; cat e.err; fi
}
"$CALIPER" run --preset tiny --shots 3 --requests 3 --max-tokens 8 --prompt-tokens 128 --no-telemetry \
  --db "$DB" --label longer >/dev/null 2>&1
expect2 "protocols differ" "prompt length 64 tok vs 128 tok" one longer --db "$DB"
expect2 "one run that is not --ab" "not an A/B run" one --db "$DB"
expect2 "an --ab run as one of two" "gate it alone" slower one --db "$DB"
expect2 "three runs" "got 3" one two longer --db "$DB"
expect2 "no run" "give one run" --db "$DB"
expect2 "unknown run" "no run \"nosuch\"" nosuch --db "$DB"
expect2 "no store" "no such store" slower --db "$E2E_TMP/none.db"
expect2 "wrong side" "lower is better" slower --db "$DB" --fail 'ttft_p99<-10%'
expect2 "NaN bound" "finite percentage" slower --db "$DB" --fail 'decode_tps<-nan%'
expect2 "huge bound" "finite percentage" slower --db "$DB" --fail 'decode_tps<-1e308%'
expect2 "unknown metric" "not a metric" slower --db "$DB" --fail 'speed<-5%'
expect2 "count metric" "no better direction" slower --db "$DB" --fail 'completed<-5%'
expect2 "alpha NaN" "--alpha" slower --db "$DB" --alpha nan
expect2 "alpha too large" "--alpha" slower --db "$DB" --alpha 0.7
expect2 "bad --box" "--box" slower --db "$DB" --box tpu
expect2 "bad --format" "--format" slower --db "$DB" --format xml
expect2 "bad --cannot-judge" "--cannot-judge" slower --db "$DB" --cannot-judge maybe
expect2 "empty run name" "empty" "" --db "$DB"
printf '{"not": "a result"}' >junk.json
expect2 "a file that is no run" "not the export of a run" junk.json
# damaged exports of the slower run: an empty run, a metric absent on one
# side, shots that do not pair, values at the edge of a double
python3 - slower.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def save(name, f):
    x = json.loads(json.dumps(d)); f(x); json.dump(x, open(name, "w"))
save("empty.json", lambda x: x.update(cells=[]))
def nodecode(x):
    for c in x["cells"]:
        if c["target"] == "B": c["decode_tps_median"] = None
save("nodecode.json", nodecode)
def shifted(x):
    for c in x["cells"]:
        if c["target"] == "B": c["shot_index"] += 1000
save("shifted.json", shifted)
def huge(x):
    for c in x["cells"]:
        c["decode_tps_median"] = 1e308 if c["target"] == "A" else 1e-300
save("huge.json", huge)
PY
expect2 "an empty run" "no measured cell" empty.json
"$CALIPER" gate nodecode.json --fail "$BOUNDS" --format json >nd.json 2>/dev/null; rc=$?
[ $rc -eq 1 ] && [ "$(jq -r '.cases[0].answer' nd.json)" = cannot_judge ] \
  && jq -r '.cases[0].text' nd.json | grep -q 'no paired shot has this metric on both sides' \
  && ok "decode absent on B: that metric cannot be judged, the others still fail" || not_ok "absent metric ($rc)"
expect2 "A and B of another shot range" "protocols differ between A and B: shot range" shifted.json
"$CALIPER" gate huge.json --fail "$BOUNDS" --format json >hg.json 2>/dev/null; rc=$?
[ $rc -eq 1 ] && [ "$(jq -r '.cases[0].answer' hg.json)" = regression ] && jq -e . hg.json >/dev/null \
  && ok "values at the edge of a double: a regression, valid JSON" || not_ok "huge values ($rc)"
"$CALIPER" gate --help | grep -q 'Exit: 0 pass, 1 regression, 3 cannot judge' && ok "--help states the exit codes" \
  || not_ok "--help"
finish
