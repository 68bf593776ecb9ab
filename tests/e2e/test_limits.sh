#!/usr/bin/env bash
# Huge numbers on the command line: every one is a usage error (exit 2) that
# names the flag and the value, found before anything runs. They used to be
# converted to an integer type first (undefined behaviour): --rate 1e30 ran
# a cell of 0 requests and exited 0.
. "$(dirname "$0")/lib.sh"
T=$E2E_TMP

# huge NAME ARGS...: exit 2, stderr names the last two arguments (flag, value)
huge() {
  local n=$1; shift
  local flag=${*: -2:1} val=${*: -1}
  "$CALIPER" "$@" >"$T/out" 2>"$T/err"; local rc=$?
  if [ "$rc" -eq 2 ] && grep -qF -- "$flag: \"$val\"" "$T/err"; then ok "$n (exit 2, names $flag \"$val\")"
  else not_ok "$n: exit $rc"; sed 's/^/  | /' "$T/out" "$T/err"; fi
}

DB="$T/none.db"
huge "run --rate 1e30"            run --db "$DB" --rate 1e30
huge "run --duration 1e10s"       run --db "$DB" --duration 1e10s
huge "run --requests 1e30"        run --db "$DB" --requests 1e30
huge "run --requests 2^63"        run --db "$DB" --requests 9223372036854775808
huge "run --seed 1e30"            run --db "$DB" --seed 1e30
huge "run --max-tokens 1e30"      run --db "$DB" --max-tokens 1e30
huge "run --prompt-tokens 1e30"   run --db "$DB" --prompt-tokens 1e30
huge "run --concurrency 1e30"     run --db "$DB" --concurrency 1e30
huge "run --shots 1e30"           run --db "$DB" --shots 1e30
huge "run --warmup 1e30"          run --db "$DB" --warmup 1e30
huge "run --rest 1e30"            run --db "$DB" --rest 1e30
huge "run --interval 1e30"        run --db "$DB" --interval 1e30
huge "run --connect-timeout 1e30" run --db "$DB" --connect-timeout 1e30
huge "run --idle-timeout 1e30"    run --db "$DB" --idle-timeout 1e30
huge "run --launch-timeout 1e30"  run --db "$DB" --launch-timeout 1e30
huge "run --port 1e30"            run --db "$DB" --port 1e30
huge "sample --duration 1e10s"    sample --duration 1e10s
huge "sample --pid 1e30"          sample --pid 1e30
huge "watch --duration 1e10s"     watch --duration 1e10s
huge "watch --ceiling 1e30"       watch --ceiling 1e30
huge "serve --seed 1e19"          serve --seed 1e19
huge "serve --max-batch 1e30"     serve --max-batch 1e30
huge "serve --max-body 1e30"      serve --max-body 1e30
huge "proxy --max-body 1e30"      proxy --max-body 1e30
huge "runs --limit 1e30"          runs --db "$DB" --limit 1e30
[ -e "$DB" ] && not_ok "a usage error created the store" || ok "no store created"
# the largest accepted time still parses (a year)
"$CALIPER" sample --duration 367d >"$T/out" 2>"$T/err"
grep -qF 'over 366 d' "$T/err" && ok "the bound is named" || { not_ok "bound not named"; cat "$T/err"; }
finish
