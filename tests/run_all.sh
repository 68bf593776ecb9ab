#!/usr/bin/env bash
# Runs every test layer and prints one closing line, "N passed, N failed".
# Unit binaries are cmocka (their "[  PASSED  ] N test(s)." lines are counted);
# fuzz replays count one per corpus; e2e scripts print "ok - …" / "not ok - …"
# lines through tests/e2e/lib.sh.
set -u
build=$1; units=$2; replays=$3; e2e=$4
pass=0; fail=0; failed_names=()
log=$(mktemp); trap 'rm -f "$log"' EXIT

count() { # $1 = name, $2 = exit status; reads $log
  local p f
  p=$(grep -E '^\[  PASSED  \] [0-9]+ test' "$log" | awk '{s+=$4} END{print s+0}')
  f=$(grep -E '^\[  FAILED  \] [0-9]+ test' "$log" | awk '{s+=$4} END{print s+0}')
  p=$((p + $(grep -cE '^ok ' "$log")))
  f=$((f + $(grep -cE '^not ok ' "$log")))
  if [ "$2" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then p=1; fi
  pass=$((pass + p)); fail=$((fail + f))
  [ "$f" -gt 0 ] && failed_names+=("$1")
  return 0
}

for t in $units; do
  echo "== unit ${t##*/}"
  "$t" >"$log" 2>&1; rc=$?
  cat "$log"; count "${t##*/}" $rc
done
for t in $replays; do
  n=${t##*/replay_}
  echo "== fuzz corpus $n"
  "$t" "tests/fuzz/corpus/$n" >"$log" 2>&1; rc=$?
  cat "$log"; count "$n" $rc
done
for t in $e2e; do
  echo "== e2e ${t##*/}"
  CALIPER="$(cd "$build" && pwd)/caliper" BUILD="$(cd "$build" && pwd)" \
    timeout "${CALIPER_E2E_TIMEOUT:-300}" bash "$t" >"$log" 2>&1; rc=$?
  [ "$rc" -eq 124 ] && echo "not ok - ${t##*/} was still running after ${CALIPER_E2E_TIMEOUT:-300} s (CALIPER_E2E_TIMEOUT)" >>"$log"
  cat "$log"; count "${t##*/}" $rc
done
[ ${#failed_names[@]} -gt 0 ] && echo "failing: ${failed_names[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
