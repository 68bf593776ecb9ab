# runs --series RUN: the trend of one shot series across its runs. The
# engine is one launch command whose pace a file sets, so every run is of
# one series; runs v1–v5 pace 5 ms a token, v6–v8 7 ms (decode 28.6 %
# slower). The trend's sparkline shows the step, the gate's decision
# between neighbours calls it a regression at v6 and nowhere else, the
# HTML page charts it; and caliper gate on two stored runs of the series
# (the separate-runs design, its noise from the series) exits 1 across the
# step and never 1 within a side of it.
source "$(dirname "$0")/lib.sh"
cd "$E2E_TMP"
DB="$E2E_TMP/t.db"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
cat >engine.sh <<SH
#!/bin/sh
exec "$CALIPER" serve --pace-ms "\$(cat "$E2E_TMP/pace")" --port "\$1"
SH
chmod +x engine.sh
for i in 1 2 3 4 5 6 7 8; do
  if [ $i -le 5 ]; then echo 5 >pace; else echo 7 >pace; fi
  "$CALIPER" run --launch "$E2E_TMP/engine.sh $PORT" --url "http://127.0.0.1:$PORT" --shots 4 --requests 3 \
    --max-tokens 8 --prompt-tokens 64 --no-telemetry --db "$DB" --label "v$i" >run$i.out 2>run$i.err \
    || { not_ok "run v$i failed"; tail -3 run$i.err; finish; }
done
ok "8 runs of one series, the pace raised from 5 to 7 ms at v6"

"$CALIPER" runs --series v8 --db "$DB" --fail 'decode_tps<-10%' -o trend.html >trend.out 2>trend.err
rc=$?
[ $rc -eq 0 ] && ok "runs --series with a trend: exit 0" || { not_ok "runs --series: exit $rc"; cat trend.err; }
grep -q '^trend · c1 · 64 tok · warm 2–4 · 8 runs, oldest first' trend.out && ok "the trend's heading names the cell" \
  || not_ok "trend heading"
spark=$(grep '^decode tok/s −10 %' trend.out | awk '{print $5}')
[ "$spark" = "█████▁▁▁" ] && ok "the sparkline shows the step at v6 ($spark)" || not_ok "sparkline \"$spark\""
grep -q 'run-to-run sd' trend.out && ok "the series' run-to-run noise printed" || not_ok "noise line"
n=$(grep -c '▼' trend.out)
grep -qE '^ +[0-9]+  v6 +[0-9.]+ ▼ -2[0-9]\.[0-9] %' trend.out && [ "$n" -eq 2 ] \
  && ok "the regression is called at v6 and nowhere else" || { not_ok "regression at v6 ($n marks)"; cat trend.out; }
grep -q '^regression: decode tok/s, run 6 (v6) from run 5' trend.out && ok "the regression named with its CI" \
  || not_ok "regression line"
grep -q 'id="chart-trend-0"' trend.html && grep -q '<td class="regression">regression</td>' trend.html \
  && [ "$(grep -c '<td class="regression">' trend.html)" -eq 1 ] && ok "HTML: the chart and one regression row" \
  || not_ok "trend HTML"
grep -q '<svg ' trend.html && ! grep -qiE '>(nan|-?inf)<' trend.html && ok "HTML: an SVG chart, no NaN" \
  || not_ok "trend SVG"

# the separate-runs gate reads the series' noise
"$CALIPER" gate v5 v6 --db "$DB" --fail 'decode_tps<-10%' >g56.out 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q 'run-to-run noise from 8 stored runs of the series' g56.out \
  && ok "gate v5 v6: exit 1, noise from the series" || { not_ok "gate v5 v6: exit $rc"; cat g56.out; }
"$CALIPER" gate v2 v3 --db "$DB" --fail 'decode_tps<-10%' --alpha 0.001 >g23.out 2>&1; rc=$?
[ $rc -ne 1 ] && ok "gate v2 v3 (same pace): exit $rc, not 1" || { not_ok "gate v2 v3: exit 1"; cat g23.out; }

# misuse
"$CALIPER" runs --db "$DB" --fail 'decode_tps<-10%' >/dev/null 2>err; [ $? -eq 2 ] && grep -q 'only with --series' err \
  && ok "--fail without --series: exit 2" || not_ok "--fail without --series"
"$CALIPER" runs --series v8 --db "$DB" --fail 'completed<-3%' >/dev/null 2>err; [ $? -eq 2 ] \
  && grep -q 'no better direction' err && ok "a count as a trend metric: exit 2" || not_ok "count metric"
"$CALIPER" runs --series v8 --db "$DB" --alpha 0 >/dev/null 2>err; [ $? -eq 2 ] && ok "--alpha 0: exit 2" \
  || not_ok "--alpha 0"
finish
