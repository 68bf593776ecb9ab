#!/usr/bin/env bash
# Verdicts come from one place, the run analysis: what `caliper run` prints at
# its end, `caliper show` prints again for the same run, line for line — the
# shot verdict, the column advice, the client self-check, notes and goodput.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
T=$E2E_TMP
DB=$T/v.db
RUN=(--preset tiny --prompt-tokens 32 --max-tokens 8 --requests 8 --serve-args "--threads 1"
     --db "$DB" --no-telemetry --seed 7)

# verdict_lines FILE: the lines a verdict renders as, and the goodput table
verdict_lines() {
  grep -E '^(verdict|read|note|clock|power|client self-check): |^\| ' "$1"
}

# same LABEL ARGS...: run, show the run by its label, compare
same() {
  local label=$1; shift
  "$CALIPER" run "${RUN[@]}" --label "$label" "$@" >"$T/$label.run" 2>"$T/$label.err"
  local rc=$?
  check "$label: the run exits 0 (rc $rc)" [ $rc -eq 0 ]
  "$CALIPER" show --db "$DB" "$label" >"$T/$label.show" 2>&1
  verdict_lines "$T/$label.run" >"$T/$label.run.v"
  verdict_lines "$T/$label.show" >"$T/$label.show.v"
  check "$label: run printed verdict lines" [ -s "$T/$label.run.v" ]
  if diff "$T/$label.run.v" "$T/$label.show.v" >"$T/$label.diff"; then
    ok "$label: show prints the verdict lines run printed"
  else
    not_ok "$label: show differs from run:"; sed 's/^/  | /' "$T/$label.diff"
  fi
  if diff "$T/$label.run" "$T/$label.show" >/dev/null; then ok "$label: show prints what run printed"
  else not_ok "$label: show's output is not run's"; diff "$T/$label.run" "$T/$label.show" | sed 's/^/  | /'; fi
}

same one --shots 1 --concurrency 1
check "one shot: the cannot-judge verdict" grep -q '^verdict: cannot judge: 1 shot' "$T/one.run"
check "one shot: the column advice" grep -q '^read: at these concurrencies read the per-request column' "$T/one.run"
check "one shot: the client self-check" grep -q '^client self-check: .* µs CPU per chunk' "$T/one.run"

same conc --shots 1 --concurrency 1,8
check "two concurrencies: the column advice names both" \
  grep -q '^read: at 1–4 users read the per-request column (c1: .*); at 8+ the aggregate one (c8: ' "$T/conc.run"

same slo --shots 1 --rate 40 --slo e2e=30s
check "an SLO: the goodput table, in run and show" \
  bash -c "grep -qi 'goodput' '$T/slo.run' && grep -qi 'goodput' '$T/slo.show'"

same shots --shots 3 --warmup 0 --concurrency 1
check "three shots: a shot verdict" grep -q '^verdict: ' "$T/shots.run"
check "three shots: no one-shot verdict" bash -c "! grep -q 'cannot judge: 1 shot' '$T/shots.run'"
finish
