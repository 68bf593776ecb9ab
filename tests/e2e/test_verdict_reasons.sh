#!/usr/bin/env bash
# Every reason a verdict gives is the condition that produced it. A
# --dataset run against a target that has /tokenize was told "the target
# has no /tokenize"; each cell now records how its prompt length was made
# (cells.prompt_basis) and the verdict names that. Here each reason is
# produced by its own condition, end to end: a dataset against targets with
# and without /tokenize, a fixed length against a target without one, a
# /tokenize that fails, a length below the nonce line, telemetry turned off.
# (tests/unit/test_analysis.c, test_prompt_reasons and test_other_reasons,
# hold every reason against its condition on constructed runs.)
. "$(dirname "$0")/lib.sh"
T=$E2E_TMP
start_faultserver "$BUILD/tests/helpers/tokfront" || { not_ok "tokfront starts"; finish; }
TF=http://127.0.0.1:$PORT
start_faultserver "$BUILD/tests/helpers/faultserver" || { not_ok "faultserver starts"; finish; }
FS=http://127.0.0.1:$PORT/normal        # answers usage, has no /tokenize (404)
printf 'Name a river.\nWhat is the deepest lake?\nExplain tides in two lines.\n' >"$T/ds.txt"
ONE=(--shots 1 --requests 4 --max-tokens 4 --no-telemetry)

"$CALIPER" run --url "$TF/honest" --dataset "$T/ds.txt" "${ONE[@]}" --db "$T/a.db" >"$T/a.out" 2>&1
check "a dataset against a target with /tokenize: the lengths vary by request, as the server counted" \
  grep -q "prompt lengths vary by request (the dataset's texts): each request's length is the server's own count, reported for 4 of 4" "$T/a.out"
check "... and it is not told the target has no /tokenize" bash -c "! grep -q 'no /tokenize' '$T/a.out'"

"$CALIPER" run --url "$FS" --dataset "$T/ds.txt" "${ONE[@]}" --db "$T/b.db" >"$T/b.out" 2>&1
check "a dataset against a target without /tokenize: still the dataset's reason" \
  grep -q "prompt lengths vary by request (the dataset's texts)" "$T/b.out"

"$CALIPER" run --url "$FS" --prompt-tokens 64 "${ONE[@]}" --db "$T/c.db" >"$T/c.out" 2>&1
check "a fixed length against a target without /tokenize: it has no /tokenize" \
  grep -q "prompt lengths are approximate (64 tok): the target has no /tokenize (4 characters per token)" "$T/c.out"

"$CALIPER" run --url "$TF/tokfail" --prompt-tokens 64 "${ONE[@]}" --db "$T/d.db" >"$T/d.out" 2>&1
check "a /tokenize that fails: it failed, not that there is none" \
  sh -c "grep -q \"prompt lengths are approximate (64 tok): the target's /tokenize failed\" '$T/d.out' && ! grep -q 'has no /tokenize' '$T/d.out'"

"$CALIPER" run --url "$TF/honest" --prompt-tokens 3 "${ONE[@]}" --db "$T/e.db" >"$T/e.out" 2>&1
check "a length below the nonce line: says so" \
  grep -q "prompt lengths are approximate (3 tok): shorter than the unique nonce line each prompt starts with" "$T/e.out"

check "telemetry off: the clock is absent because telemetry was off" \
  grep -q "^note: clock: absent — telemetry was off" "$T/a.out"
finish
