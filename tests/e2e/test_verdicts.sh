#!/usr/bin/env bash
# The calibrated shot verdict end to end, against one warmed built-in engine
# run as a URL target (caliper cannot know its shot 1 was cold):
#  - two shots never give a directional claim: "cannot judge: 1 warm shot";
#  - --shots 1 says it cannot judge and what to run;
#  - a steady engine under the default protocol (no shot flag: --warmup 1
#    --shots 5, 8 requests) stays silent: 8 runs, at most 2 directional
#    verdicts. Without the warm-up shot, a new client's shot 1 is really
#    slower here (every run, 10–15 %: docs/run.md), and saying so is not a
#    false alarm. Each run stores its series' noise; --pool-noise judges with
#    the earlier runs' shot spread pooled in. The rate is <= 5 %
#    for normal shot noise and measured 0–5 % here (bench/verdicts); a shared
#    machine's stalls make rarer, larger outliers, so 3 of 8 at 5 % (0.6 %)
#    is the line: a rate like the old band's (~25 %) fails it one time in 3,
#    and the seeded unit test pins the rate itself (tests/unit/test_judge.c);
#  - compare widens its CI by the run-to-run noise of those stored repeats,
#    and without repeats says its CI covers within-run noise only;
#  - a real wall is caught: after shot 1 the engine loses 60 % of the CPU it
#    was getting (a cgroup CPU quota when root, else a busy loop pinned to
#    the engine's core), and the verdict says "below shot 1 … quote warm
#    figures", with its CI, and blames no warm-up.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
T=$E2E_TMP
DB=$T/v.db
CG=""
HOG=""
undo() {
  [ -n "$HOG" ] && kill "$HOG" 2>/dev/null; HOG=""
  if [ -n "$CG" ] && [ -d "$CG" ]; then
    for p in $(cat "$CG/cgroup.procs" 2>/dev/null); do echo "$p" >"$(dirname "$CG")/cgroup.procs" 2>/dev/null; done
    rmdir "$CG" 2>/dev/null
  fi
  CG=""
}
trap 'undo; cleanup_e2e' EXIT

start_serve --preset tiny --threads 1 || { not_ok "serve did not start"; finish; }
RUN=(--url "$SERVE_URL" --prompt-tokens 64 --max-tokens 128 --concurrency 1 --requests 8
     --db "$DB" --no-telemetry)
"$CALIPER" run "${RUN[@]}" --shots 1 --label warm >/dev/null 2>&1

# --- two shots: no directional claim ------------------------------------------
"$CALIPER" run "${RUN[@]}" --shots 2 --label two >"$T/two.out" 2>&1
check "two shots: cannot judge, and says what to run" \
  grep -q "^verdict: cannot judge: 1 warm shot; measure 5 shots" "$T/two.out"

check "--shots 1: cannot judge, and says what to run" \
  bash -c "\"$CALIPER\" run ${RUN[*]} --shots 1 --label one 2>&1 | grep -q '^verdict: cannot judge: 1 shot; the default protocol'"

# --- a flag changes only what it names ----------------------------------------------
# --rest alone keeps the default protocol's shots (it once ran one shot, with
# no shots to rest between and no verdict)
"$CALIPER" run "${RUN[@]}" --rest 0.1s --label rested --db "$T/rest.db" >"$T/rest.out" 2>&1
check "--rest alone: a warm-up and 5 measured shots, each after the rest" \
  [ "$(sqlite3 "$T/rest.db" "select count(*) || ':' || sum(shot_kind = 'warmup') from cells")" = "6:1" ]
check "--rest alone: a verdict line" grep -q "^verdict: " "$T/rest.out"

# --- the bound a "no wall" claims ------------------------------------------------
for bad in 0 150% x; do
  "$CALIPER" run "${RUN[@]}" --equivalence "$bad" >"$T/eq.out" 2>&1; rc=$?
  check "--equivalence $bad: a usage error naming the flag (exit $rc)" \
    bash -c "[ $rc = 2 ] && grep -q -- '--equivalence' '$T/eq.out'"
done
# (a store of its own: the steady runs below count the runs of their series)
"$CALIPER" run "${RUN[@]}" --equivalence 60% --label eq60 --db "$T/eq.db" >"$T/eq60.out" 2>&1
check "--equivalence 60%: stored with the protocol" \
  [ "$(sqlite3 "$T/eq.db" "select json_extract(protocol, '\$.equivalence') from runs where label = 'eq60'")" = 0.6 ]
# (a verdict that rules on no bound, a wall or warm shots that disagree,
# names none; one that rules on a bound names 60 %, never the default)
check "--equivalence 60%: the verdict's bound is 60 %, never the default" \
  bash -c "grep -q '^verdict: ' '$T/eq60.out' && ! grep -qE '^verdict: .*larger than [0-57-9][0-9]* %' '$T/eq60.out'"

# --- steady: silent ------------------------------------------------------------
loud=0; said=0
for i in 1 2 3 4 5 6 7 8; do
  "$CALIPER" run "${RUN[@]}" --label "steady$i" >"$T/steady$i.out" 2>&1
  v=$(grep "^verdict:" "$T/steady$i.out")
  [ -n "$v" ] && said=$((said + 1))
  if echo "$v" | grep -qE "run [0-9.]+ % (below|above) shot [12], 95 % CI .*: (quote|shot|the first)|[0-9.]+ % per shot, "; then
    loud=$((loud + 1)); echo "# steady run $i: $v"
  fi
done
check "every steady run prints a verdict line" [ "$said" -eq 8 ]
check "steady engine: at most 2 directional verdicts in 8 runs (got $loud)" [ "$loud" -le 2 ]
check "the default protocol is a warm-up and 5 measured shots" \
  bash -c "[ \$(sqlite3 '$DB' \"select count(*) from cells c join runs r on r.id = c.run_id where r.label = 'steady1' and c.shot_kind = 'warmup'\") = 1 ] &&
           [ \$(sqlite3 '$DB' \"select count(*) from cells c join runs r on r.id = c.run_id where r.label = 'steady1' and c.shot_kind != 'warmup'\") = 5 ]"
check "each steady run stores its series' noise" \
  [ "$(sqlite3 "$DB" "select count(*) from noise n join runs r on r.id = n.run_id where r.label like 'steady%' and n.shots = 4")" = 8 ]
check "the last steady run's protocol names its series and the 7 runs before it, and pools none" \
  [ "$(sqlite3 "$DB" "select json_extract(protocol, '\$.noise_prior.runs') || ':' || json_extract(protocol, '\$.noise_prior.shot_df') from runs where label = 'steady8'")" = "7:0.0" ]
"$CALIPER" runs --db "$DB" --series steady8 >"$T/series8.out" 2>&1
check "runs --series: the steady series' history, one row a run, and the next run's spread" \
  bash -c "[ \$(grep -cE '^ +[0-9]+ +[-+][0-9.]+ % ' '$T/series8.out') -ge 8 ] &&
           grep -q 'no change called' '$T/series8.out' && grep -q \"^the next run's first shot\" '$T/series8.out'"
"$CALIPER" run "${RUN[@]}" --pool-noise --label pooled >"$T/pooled.out" 2>&1
check "--pool-noise: the verdict pools the 8 earlier runs' 4 warm shots each (24 df)" \
  [ "$(sqlite3 "$DB" "select json_extract(protocol, '\$.noise_prior.runs') || ':' || json_extract(protocol, '\$.noise_prior.shot_df') from runs where label = 'pooled'")" = "8:24.0" ]
check "--pool-noise: a verdict line" grep -q "^verdict: " "$T/pooled.out"
"$CALIPER" compare steady1 steady8 --db "$DB" >"$T/aa.out" 2>&1
check "compare of two stored repeats: the per-request CI carries run-to-run noise" \
  bash -c "grep -E '^per-request tok/s .* warm 3–6 ' '$T/aa.out' | grep -q '(CI [0-9.]*–[0-9.]*)' &&
           ! grep -E '^per-request tok/s .* warm 3–6 ' '$T/aa.out' | grep -q 'within-run'"
sqlite3 "$DB" "delete from noise"
"$CALIPER" compare steady1 steady8 --db "$DB" >"$T/aa0.out" 2>&1
check "compare without repeats: within-run noise only, no claim" \
  bash -c "grep -q '^CIs cover within-run noise only' '$T/aa0.out' && ! grep -q ' differs' '$T/aa0.out'"
check "a quiet verdict claims no wall only with its CI inside the bound, else cannot judge with the band" \
  bash -c "grep -h '^verdict:' '$T'/steady*.out | grep -qE 'within [0-9]+ % of shot [12]: no wall larger than [0-9]+ % \([-+][0-9.]+ %, 90 % CI [-+][0-9.]+ to [-+][0-9.]+ %|cannot judge: .*95 % CI .*too wide to rule out a wall larger than [0-9]+ %|under the'"
check "no steady verdict says 'no wall seen' (an absence the band cannot show)" \
  bash -c "! grep -h '^verdict:' '$T'/steady*.out | grep -q 'no wall seen'"

# --- a wall after shot 1 ----------------------------------------------------------
cpu_s() { awk '{ split($0, a, ") "); split(a[2], f, " "); print (f[12] + f[13]) / 100 }' "/proc/$SERVE_PID/stat"; }
slow_after_shot1() {   # $1: label
  local c0 w0 c1 w1 share quota
  c0=$(cpu_s); w0=$EPOCHREALTIME
  # a rest before each later shot lets the cut land before shot 2 starts
  "$CALIPER" run "${RUN[@]}" --shots 5 --rest 1s --label "$1" >"$T/$1.out" 2>"$T/$1.err" &
  local pid=$!
  for _ in $(seq 1 1500); do grep -qs "^shot 1 · " "$T/$1.err" && break; sleep 0.02; done
  c1=$(cpu_s); w1=$EPOCHREALTIME
  if [ "$(id -u)" = 0 ] && { [ -d /sys/fs/cgroup/cpu ] || [ -f /sys/fs/cgroup/cgroup.controllers ]; }; then
    share=$(awk -v a="$c0" -v b="$c1" -v s="$w0" -v e="$w1" 'BEGIN { x = (b - a) / (e - s); if (x < 0.05 || x > 1) x = 1; print x }')
    # a short period spreads the cut evenly over every request: with 100 ms
    # periods a 0.3 s request ran in 3 or 4 bursts, and one shot spread ±100 %
    quota=$(awk -v x="$share" 'BEGIN { q = 0.4 * x * 10000; if (q < 1000) q = 1000; printf "%d", q }')
    if [ -d /sys/fs/cgroup/cpu ]; then
      CG=/sys/fs/cgroup/cpu/caliper-e2e-$$; mkdir -p "$CG" && echo "$SERVE_PID" >"$CG/cgroup.procs" &&
        echo 10000 >"$CG/cpu.cfs_period_us" && echo "$quota" >"$CG/cpu.cfs_quota_us"
    else
      CG=/sys/fs/cgroup/caliper-e2e-$$; mkdir -p "$CG" && echo "$SERVE_PID" >"$CG/cgroup.procs" &&
        echo "$quota 10000" >"$CG/cpu.max"
    fi
    echo "# engine had $share of a core in shot 1; quota now $quota us per 10 ms"
  else
    local core=$(( $(nproc) - 1 ))
    taskset -a -pc "$core" "$SERVE_PID" >/dev/null
    taskset -c "$core" sh -c 'while :; do :; done' & HOG=$!
  fi
  wait "$pid"; local rc=$?
  undo
  return $rc
}
slow_after_shot1 wall; rc=$?
if ! grep -q "^verdict: shots 2–5 run .* below shot 1, 95 % CI .* quote warm figures" "$T/wall.out"; then
  echo "# wall run saw: $(grep -E '^verdict' "$T/wall.out") — once more (other work shares this machine)"
  slow_after_shot1 wall2; rc=$?
  cp "$T/wall2.out" "$T/wall.out"
fi
echo "# wall run: $(grep -E '^verdict' "$T/wall.out")"
check "the slowed run completes" [ $rc -eq 0 ]
if grep -q "^verdict: shots 2–5 run .* below shot 1, 95 % CI [0-9.]*–[0-9.]* % (per-request tok/s): quote warm figures, not shot 1" "$T/wall.out"; then
  ok "a wall after shot 1 is called, with its CI"
else
  not_ok "a wall after shot 1 is called, with its CI: $(grep -E '^verdict' "$T/wall.out")"
fi
check "no warm-up is blamed on a URL target" bash -c "! grep -q 'warm-up' '$T/wall.out'"
check "the verdict is stored with the run" \
  bash -c "sqlite3 '$DB' \"select verdicts from runs where label like 'wall%'\" | grep -q 'below shot 1, 95 % CI'"
# a run whose verdict called a wall is marked so in its series' noise: the
# next run's first-shot spread leaves it out, and runs --series says so
if grep -q "below shot 1, 95 % CI" "$T/wall.out"; then
  check "the wall run's noise row is marked a wall" \
    [ "$(sqlite3 "$DB" "select n.wall from noise n join runs r on r.id = n.run_id where r.label like 'wall%' order by r.id desc limit 1")" = 1 ]
  last_wall=$(sqlite3 "$DB" "select label from runs where label like 'wall%' order by id desc limit 1")
  "$CALIPER" runs --db "$DB" --series "$last_wall" >"$T/series.out" 2>&1
  check "runs --series: the wall run is listed as left out" \
    grep -q "called a change: left out of the first shots' spread" "$T/series.out"
fi
finish
