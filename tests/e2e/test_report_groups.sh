# Many engines on one page: 13 results (tests/helpers/thirteen.py, made
# from one real run) under 4 protocols. `caliper report` draws them side by
# side: a table of the groups, one figure per metric with every engine and
# each group a panel of its own axis, ranked within it in the order the
# numbers give, the other protocols' differing fields named, the stale and
# other-version results marked; the page renders in headless Chromium; the
# Markdown ranks the same; `compare` ranks within groups too (text, JSON).
source "$(dirname "$0")/lib.sh"
HELPER="$(cd "$(dirname "$0")/../helpers" && pwd)/thirteen.py"
cd "$E2E_TMP"
DB="$E2E_TMP/r.db"

"$CALIPER" run --preset tiny --shots 3 --requests 4 --max-tokens 16 --prompt-tokens 64 --no-telemetry \
  --db "$DB" --label base >run.out 2>run.err || { not_ok "the base run failed"; tail -3 run.err; finish; }
"$CALIPER" report base --db "$DB" --format json -o base.json 2>/dev/null
python3 "$HELPER" base.json e13 >order.txt || { not_ok "thirteen.py failed"; finish; }
[ "$(ls e13/*.json | wc -l)" -eq 13 ] && ok "13 results under 4 protocols" || not_ok "13 files"

check "report of 13 results -o page.html" "$CALIPER" report e13/*.json -o page.html
H=page.html
grep -q 'id="side-by-side"' $H && ok "the side-by-side section" || not_ok "side-by-side section"
n=$(grep -c '<tr data-group=' $H)
[ "$n" -eq 4 ] && ok "the table of groups: 4 groups" || not_ok "groups table ($n)"
for f in side-throughput side-decode side-ttft side-e2e; do
  k=$(python3 - "$H" "$f" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
fig = re.search(r'<figure id="%s".*?</figure>' % sys.argv[2], s, re.S).group(0)
print(len(re.findall(r'<g class="group"', fig)))
PY
)
  [ "$k" = 4 ] && ok "$f: 4 group panels" || not_ok "$f: $k group panels"
done
grep -q 'aggregate (all output tokens' $H && grep -q 'per-request (median' $H \
  && ok "throughput: both columns in one figure" || not_ok "both columns"
grep -q 'another protocol than group 1, not comparable with it: concurrency 1 vs 4' $H \
  && ok "group 2 names its differing field" || not_ok "group 2 differs"
grep -q 'probe caliper 0.1.0 vs vllm bench serve' $H && ok "group 3: another tool's protocol named" \
  || not_ok "group 3 differs"
grep -q 'rest 0 s vs 15 s' $H && ok "group 4: the rest named" || not_ok "group 4 differs"
grep -q '⚠ stale' $H && grep -q 'measured 90 d ago' $H && ok "the 90-day-old result is marked stale" \
  || not_ok "stale mark"
grep -q 'engine version b4567, not b4100' $H && ok "another version of a same-named engine is marked" \
  || not_ok "version mark"
grep -q 'ollama 0.5 &lt;q4&gt;&amp;co' $H && ! grep -q 'ollama 0.5 <q4>' $H && ok "labels escaped" \
  || not_ok "escaping"
grep -qiE '>(nan|-?inf)<' $H && not_ok "a NaN or inf drawn" || ok "no NaN or inf drawn"

# the rank drawn in each group of the decode figure is the numbers' order
python3 - "$H" order.txt <<'PY' && ok "decode: every group ranked in the order of its numbers" || not_ok "decode rank order"
import re, sys, html
s = open(sys.argv[1]).read()
fig = re.search(r'<figure id="side-decode".*?</figure>', s, re.S).group(0)
want = {}
for line in open(sys.argv[2]):
    g, names = line.split(": ", 1)
    want[int(g.split()[1])] = [n.strip() for n in names.split(" | ")]
for g, names in want.items():
    panel = re.search(r'<g class="group" data-group="%d">(.*?)</g>' % g, fig, re.S).group(1)
    drawn = [html.unescape(t) for t in re.findall(r'<text x="34" y="[0-9.]+" fill="#1f2328">(.*?)</text>', panel)]
    for d, w in zip(drawn, names):
        assert w.startswith(d.rstrip("…")), (g, drawn, names)
    assert len(drawn) == len(names), (g, drawn, names)
PY

# Markdown: the same ranking, tables per group
"$CALIPER" report e13/*.json --format md -o page.md 2>/dev/null
grep -q '^# Engines side by side' page.md && [ "$(grep -c '^## Group ' page.md)" -eq 4 ] \
  && ok "Markdown: the groups, ranked" || not_ok "Markdown groups"
if need cmark-gfm "the Markdown rendered"; then
  t=$(cmark-gfm -e table page.md | grep -c '<table>')
  [ "$t" -ge 20 ] && ok "Markdown renders its $t tables" || not_ok "Markdown tables ($t)"
fi

# compare: the ranking within groups, text and JSON
"$CALIPER" compare e13/*.json --no-ci >cmp.out 2>&1
grep -q 'ranking within protocol groups (13 results, 4 groups' cmp.out && ok "compare: ranked within groups" \
  || not_ok "compare ranking"
grep -q 'group 2 · c4 · 64 tok · warm 2–3 · 4 engines — differs from group 1: concurrency 1 vs 4' cmp.out \
  && ok "compare: group 2 named apart" || not_ok "compare group 2"
"$CALIPER" compare e13/*.json --no-ci --format json >cmp.json 2>/dev/null
[ "$(jq '.groups | length' cmp.json)" = 4 ] && [ "$(jq -r '.groups[0].rankings.decode_tps_median[0].label' cmp.json)" = "mlx-lm 0.21" ] \
  && ok "compare JSON: 4 groups, mlx-lm first in group 1" || not_ok "compare JSON groups"
jq -e '.groups[1].rankings.decode_tps_median | map(.value) | . == (sort | reverse)' cmp.json >/dev/null \
  && ok "compare JSON: a group's decode values in rank order" || not_ok "compare JSON order"
"$CALIPER" report e13/*.json --stale 0 -o nostale.html 2>/dev/null
! grep -q '⚠ stale' nostale.html && ok "--stale 0: nothing stale" || not_ok "--stale 0"
"$CALIPER" report e13/*.json --stale -3d -o x.html >/dev/null 2>err; [ $? -eq 2 ] && ok "--stale negative: exit 2" \
  || not_ok "--stale negative"
"$CALIPER" report e13/*.json --now http://127.0.0.1:1 -o x.html >/dev/null 2>err; rc=$?
[ $rc -eq 1 ] && grep -q 'did not say which model' err && ok "--now: an engine that does not answer, exit 1" \
  || not_ok "--now no answer ($rc)"

# in a real browser: the page parses, every figure there, no console message
if need chromium "the page in a real browser"; then
  prof=$(mktemp -d "$E2E_TMP/chr.XXXX")
  flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
         --disable-component-update --disable-sync --user-data-dir="$prof" --enable-logging=stderr --v=0)
  timeout 120 chromium "${flags[@]}" --dump-dom "file://$E2E_TMP/$H" >dom.html 2>chr.err
  n=$(grep -o '<g class="group"' dom.html | wc -l)
  [ "$n" -eq 16 ] && ok "chromium: 16 group panels in the DOM" || not_ok "chromium DOM ($n panels)"
  if grep -q 'CONSOLE' chr.err; then not_ok "chromium: console messages"; grep CONSOLE chr.err | head -3
  else ok "chromium: no console message"; fi
  timeout 120 chromium "${flags[@]}" --screenshot="$E2E_TMP/shot.png" --window-size=1280,3400 \
    "file://$E2E_TMP/$H" >/dev/null 2>&1
  sz=$(stat -c %s shot.png 2>/dev/null || echo 0)
  [ "$sz" -gt 100000 ] && ok "chromium: screenshot ($sz bytes)" || not_ok "chromium screenshot ($sz bytes)"
  [ -n "${CALIPER_KEEP_SHOT:-}" ] && cp shot.png "$CALIPER_KEEP_SHOT"
fi
finish
