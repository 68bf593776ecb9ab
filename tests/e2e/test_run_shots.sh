#!/usr/bin/env bash
# The shot-series verdict end to end (SPEC 1.1): a real CPU hog that starts
# after shot 1 must produce "below shot 1: quote warm figures"; a steady run
# must not. caliper and its engine (one compute thread) are pinned to one
# core with taskset, and the hog is a busy loop pinned to that same core, so
# the engine loses about half its core whatever else runs on the machine.
# Shots of a fraction of a second on a machine shared with other work swing
# by several per cent, so both runs call drops only beyond 12 % (--noise-floor);
# the hog costs the engine about half its speed. The verdict judges shots, not
# requests, so each shot carries 8 requests of 128 tokens: enough that the
# hogged shots agree with each other more than they differ from shot 1.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
T=$E2E_TMP
DB=$T/s.db
RUN=(--preset tiny --prompt-tokens 64 --max-tokens 128 --concurrency 1 --requests 8
     --serve-args "--threads 1" --noise-floor 12% --db "$DB" --no-telemetry)
PIN=()
CORE=$(( $(nproc) - 1 ))
command -v taskset >/dev/null && PIN=(taskset -c "$CORE")
HOGS=()
stop_hogs() { for h in "${HOGS[@]:-}"; do [ -n "$h" ] && kill "$h" 2>/dev/null; done; HOGS=(); }
trap 'stop_hogs; cleanup_e2e' EXIT

# --- a hog after shot 1: the drop verdict appears -----------------------------
"${PIN[@]}" "$CALIPER" run "${RUN[@]}" --shots 5 --rest 0.5s --label hogged >"$T/hog.out" 2>"$T/hog.err" &
pid=$!
for _ in $(seq 1 600); do grep -qs "^shot 1 · " "$T/hog.err" && break; sleep 0.02; done
"${PIN[@]}" sh -c 'while :; do :; done' &
HOGS+=($!)
wait $pid; rc=$?
stop_hogs
if [ $rc -eq 0 ]; then ok "the hogged run completes"
else not_ok "the hogged run completes (rc $rc): $(grep -E '^note|^caliper run' "$T/hog.out" "$T/hog.err" | tail -3)"; fi
check "shot 1 is cold, shots 2-5 rested" \
  [ "$(sqlite3 "$DB" "select group_concat(shot_kind) from (select shot_kind from cells c join runs r on r.id=c.run_id where r.label='hogged' order by seq)")" = "cold,rested,rested,rested,rested" ]
if grep -q "^verdict: shots 2–5 run .* below shot 1, 95 % CI .*quote warm figures" "$T/hog.out"; then
  ok "a hog after shot 1 gives the drop verdict"
else
  not_ok "a hog after shot 1 gives the drop verdict: $(grep -E '^verdict' "$T/hog.out")"
fi
check "the verdict is stored with the run" \
  bash -c "sqlite3 '$DB' \"select verdicts from runs where label='hogged'\" | grep -q 'below shot 1'"

# --- steady: no drop verdict (one retry: other work shares this machine) ------
steady() {
  "${PIN[@]}" "$CALIPER" run "${RUN[@]}" --shots 4 --warmup 1 --label steady >"$T/steady.out" 2>"$T/steady.err"
}
steady; rc=$?
if ! grep -q "^verdict: .*within noise of shot 2.*no wall seen" "$T/steady.out"; then
  echo "# steady run saw: $(grep -E '^verdict' "$T/steady.out") — retrying once"
  steady; rc=$?
fi
check "the steady run completes" [ $rc -eq 0 ]
check "the warm-up shot is recorded as warmup" \
  [ "$(sqlite3 "$DB" "select shot_kind from cells c join runs r on r.id=c.run_id where r.label='steady' and c.shot_index=1 order by r.id desc limit 1")" = warmup ]
if grep -q "^verdict: shots 3–5 within noise of shot 2 .*no wall seen" "$T/steady.out"; then
  ok "a steady run gives no drop verdict"
else
  not_ok "a steady run gives no drop verdict: $(grep -E '^verdict' "$T/steady.out")"
fi
check "the cells table quotes the warm shots 3-5 only" grep -q "shots 3–5 pooled" "$T/steady.out"
finish
