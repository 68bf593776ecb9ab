# caliper report on a real run (shots, a concurrency sweep and a prompt-length
# sweep against the built-in engine): the HTML page holds every chart with
# axes, legends and protocol captions, the verdicts first, nothing external;
# Markdown, CSV and JSON agree; the JSON reads back. With chromium installed the
# page renders headless with no console message and a screenshot is taken.
source "$(dirname "$0")/lib.sh"
cd "$E2E_TMP"
DB="$E2E_TMP/r.db"

# exit 1 only says a request failed (it is counted and stored): the run is usable
"$CALIPER" run --preset tiny --shots 3 --concurrency 1,2,4 --prompt-tokens 64,128,256 \
  --max-tokens 12 --requests 4 --db "$DB" --label sweep --seed 7 >run.out 2>run.err
rc=$?
if [ $rc -gt 1 ] || ! grep -q '^stored: run' run.out; then
  not_ok "caliper run for the report failed (exit $rc)"; tail -5 run.out run.err; finish
fi
ok "a run with shots, a concurrency sweep and a prompt-length sweep"

check "report -o report.html" "$CALIPER" report sweep --db "$DB" -o report.html
H=report.html
n_svg=$(grep -o '<svg ' $H | wc -l)
[ "$n_svg" -eq 5 ] && ok "five charts" || not_ok "five charts (got $n_svg)"
for id in chart-shots-0 chart-concurrency-0 chart-prefill-0 chart-ttft-0 chart-itl-0; do
  grep -q "id=\"$id\"" $H && ok "chart $id present" || not_ok "chart $id present"
done
n_cap=$(grep -o '</b> Protocol: ' $H | wc -l)
[ "$n_cap" -eq 5 ] && ok "every chart captioned with its protocol" || not_ok "captions ($n_cap)"
grep -q 'Protocol: shots cold 1, warm 2–3' $H && ok "shot caption names the shots" || not_ok "shot caption"
grep -q 'concurrency 1, 2, 4' $H && ok "curve caption names the concurrencies" || not_ok "curve caption"
# the target's own URL may be printed as text; nothing may be loaded from anywhere
if grep -qiE '<script|<link|<iframe|<object|<embed|<img| (src|href)=|url\([^#]|@import' $H; then
  not_ok "self-contained (found a script, link or external resource)"
else ok "self-contained: no script, no link, no external resource"; fi
if grep -oE 'https?://[^ "<]*' $H | grep -qv '^http://127\.0\.0\.1'; then not_ok "no URL but the target's"
else ok "no URL but the measured target's own"; fi
v=$(grep -bo 'id="verdicts"' $H | head -1 | cut -d: -f1); s=$(grep -bo '<svg ' $H | head -1 | cut -d: -f1)
[ -n "$v" ] && [ -n "$s" ] && [ "$v" -lt "$s" ] && ok "verdicts before the charts" || not_ok "verdicts first"
grep -q 'read the per-request column' $H && ok "column verdict" || not_ok "column verdict"
# a per-token cost is printed only where its CI says so (a loaded machine may not)
grep -qE 'prefill: (fixed cost|no per-token cost shown)' $H && ok "prefill fit verdict" || not_ok "prefill fit verdict"
grep -q 'fit: ' $H && ok "fitted line in the legend" || not_ok "fitted line legend"
grep -q 'time since run start (s)' $H && grep -q 'output (tok/s)' $H && grep -q 'TTFT (ms)' $H &&
  ok "axes carry units" || not_ok "axes carry units"
if grep -q 'clock (MHz)' $H; then ok "clock panel on the time axis"; else not_ok "clock panel"; fi
# where no sensor was read the page must say so, not draw zeros
grep -qE 'clock: absent|mean over shot|sampled' $H && ok "clock drawn or marked absent" || not_ok "clock absent line"
grep -qiE '>nan<| nan |NaN' $H && not_ok "no NaN in the page" || ok "no NaN in the page"

# the other formats, from the same table
"$CALIPER" report sweep --db "$DB" --format md >r.md && grep -q '^## Verdicts' r.md && grep -q 'aggregate tok/s' r.md \
  && ok "markdown" || not_ok "markdown"
"$CALIPER" report sweep --db "$DB" --format csv >r.csv
lines=$(wc -l <r.csv); cells=$(grep -c '^[0-9]' r.csv)
[ "$lines" -eq $((cells + 1)) ] && [ "$cells" -ge 9 ] && head -1 r.csv | grep -q output_throughput \
  && ok "csv: a header and one line per cell ($cells)" || not_ok "csv ($lines lines, $cells cells)"
"$CALIPER" report sweep --db "$DB" -o r.json && grep -q '"format": "caliper-result"' r.json \
  && ok "json" || not_ok "json"
"$CALIPER" report r.json -o again.html 2>/dev/null && [ "$(grep -o '<svg ' again.html | wc -l)" -eq 5 ] \
  && ok "the JSON reads back into the same report" || not_ok "json round trip"

# usage errors name the flag and the value
"$CALIPER" report sweep --db "$DB" --format pdf >/dev/null 2>err; rc=$?
[ $rc -eq 2 ] && grep -q -- '--format: "pdf"' err && ok "bad --format: exit 2, named" || not_ok "bad --format ($rc)"
"$CALIPER" report --db "$DB" >/dev/null 2>err; [ $? -eq 2 ] && ok "no run: exit 2" || not_ok "no run: exit 2"
"$CALIPER" report no-such-run --db "$DB" >/dev/null 2>err; rc=$?
[ $rc -eq 1 ] && grep -q 'no-such-run' err && ok "unknown run: exit 1, named" || not_ok "unknown run ($rc)"

# in a real browser: parses, every chart there, no console message, a screenshot
if need chromium "the report in a real browser"; then
  prof=$(mktemp -d "$E2E_TMP/chr.XXXX")
  flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update
         --disable-sync --no-first-run --user-data-dir="$prof" --enable-logging=stderr --v=0)
  timeout 90 chromium "${flags[@]}" --dump-dom "file://$E2E_TMP/$H" >dom.html 2>chr.err
  n=$(grep -o '<svg ' dom.html | wc -l)
  [ "$n" -eq 5 ] && ok "chromium: the DOM has the five charts" || not_ok "chromium DOM ($n svg)"
  if grep -q 'CONSOLE' chr.err; then not_ok "chromium: console messages"; grep CONSOLE chr.err | head -5
  else ok "chromium: no console message"; fi
  timeout 90 chromium "${flags[@]}" --screenshot="$E2E_TMP/shot.png" --window-size=1280,2400 \
    "file://$E2E_TMP/$H" >/dev/null 2>&1
  sz=$(stat -c %s shot.png 2>/dev/null || echo 0)
  [ "$sz" -gt 50000 ] && ok "chromium: screenshot ($sz bytes)" || not_ok "chromium screenshot ($sz bytes)"
  [ -n "${CALIPER_KEEP_SHOT:-}" ] && cp shot.png "$CALIPER_KEEP_SHOT"
fi
finish
