#!/usr/bin/env bash
# The shot-series verdict end to end (SPEC 1.1): an engine that slows down
# after shot 1 must produce "below shot 1: quote warm figures"; a steady run
# must not.
#
# The slowdown is deterministic: an in-process engine (tests/helpers/
# slowengine, measured by the library's run model) sleeps 1 ms a token in
# shot 1 and 20 ms from shot 2 on, so the drop is the engine's, whatever
# else loads the machine (load only adds time to every shot). A CPU hog
# started after shot 1 used to stand for it, and a busy machine could hide
# it.
#
# The steady run is the built-in engine through `caliper run`, pinned to one
# core with its engine on one thread; shots of a fraction of a second on a
# shared machine swing by several per cent, so it calls drops only beyond
# 12 % (--noise-floor), with one retry.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
T=$E2E_TMP
DB=$T/s.db
RUN=(--preset tiny --prompt-tokens 64 --max-tokens 24 --concurrency 1 --requests 6
     --serve-args "--threads 1" --noise-floor 12% --db "$DB" --no-telemetry)
PIN=()
CORE=$(( $(nproc) - 1 ))
command -v taskset >/dev/null && PIN=(taskset -c "$CORE")

# --- an engine that slows after shot 1: the drop verdict appears --------------
"$BUILD/tests/helpers/slowengine" "$DB" slowed 5 0.2 1 20 >"$T/slow.out" 2>&1
check "the slowed run completes and is stored" grep -q "^run " "$T/slow.out"
check "shot 1 is cold, shots 2-5 rested" \
  [ "$(sqlite3 "$DB" "select group_concat(shot_kind) from (select shot_kind from cells c join runs r on r.id=c.run_id where r.label='slowed' order by seq)")" = "cold,rested,rested,rested,rested" ]
"$CALIPER" show --db "$DB" slowed >"$T/slow.show" 2>&1
if grep -q "^verdict: shots 2–5 run .* below shot 1, 95 % CI .*quote warm figures" "$T/slow.show"; then
  ok "a slowdown after shot 1 gives the drop verdict"
else
  not_ok "a slowdown after shot 1 gives the drop verdict: $(grep -E '^verdict' "$T/slow.show")"
fi
check "the verdict is stored with the run" \
  bash -c "sqlite3 '$DB' \"select verdicts from runs where label='slowed'\" | grep -q 'below shot 1'"

# --- steady: no drop verdict (two retries: other work shares this machine) ----
# A steady run claims no wall: either "no wall larger than 10 %" (its CI
# inside the bound) or "cannot judge" with the band it got, never a wall.
# Other work starting on this machine mid-run is a real wall for the
# engine, so a called one is tried again, up to three runs in all.
steady() {
  "${PIN[@]}" "$CALIPER" run "${RUN[@]}" --shots 4 --warmup 1 --label steady >"$T/steady.out" 2>"$T/steady.err"
}
steady; rc=$?
quiet_verdict='^verdict: (shots 3–5 within [0-9]+ % of shot 2: no wall larger than [0-9]+ %|cannot judge: )'
for attempt in 2 3; do
  grep -qE "$quiet_verdict" "$T/steady.out" && break
  echo "# steady run saw: $(grep -E '^verdict' "$T/steady.out") — run $attempt of 3"
  steady; rc=$?
done
check "the steady run completes" [ $rc -eq 0 ]
check "the warm-up shot is recorded as warmup" \
  [ "$(sqlite3 "$DB" "select shot_kind from cells c join runs r on r.id=c.run_id where r.label='steady' and c.shot_index=1 order by r.id desc limit 1")" = warmup ]
if grep -qE "$quiet_verdict" "$T/steady.out"; then
  ok "a steady run gives no drop verdict"
else
  not_ok "a steady run gives no drop verdict: $(grep -E '^verdict' "$T/steady.out")"
fi
check "the cells table quotes the warm shots 3-5 only" grep -q "shots 3–5 pooled" "$T/steady.out"
finish
