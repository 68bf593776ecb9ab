#!/usr/bin/env bash
# A --launch'ed engine gets exactly the caller's environment: nothing added
# (no OPENBLAS_CORETYPE: only `caliper serve` sets that, for itself), nothing
# removed, nothing changed. And an API key longer than the one bound every
# HTTP call shares is refused up front, naming the flag.
source "$(dirname "$0")/lib.sh"
cd "$E2E_TMP" || exit 1
# A small, known environment (PWD included: /bin/sh exports it as it finds it).
CALLER=(PATH="$PATH" HOME="$E2E_TMP" PWD="$E2E_TMP" LC_ALL=C
        CALIPER_TEST_VAR='a b=c;$x "q"' OPENBLAS_NUM_THREADS=1 EMPTY=)
env -i "${CALLER[@]}" "$CALIPER" run --launch "env -0 > '$E2E_TMP/launched.env'; exit 3" \
  --port 9 --no-telemetry --db "$E2E_TMP/r.db" >run.out 2>run.err
rc=$?
[ $rc -eq 1 ] && grep -q 'status 3' run.err && ok "the launched command ran and its exit was reported" ||
  not_ok "run exit $rc: $(tail -2 run.err)"
printf '%s\0' "${CALLER[@]}" | sort -z >want.env
sort -z launched.env >got.env 2>/dev/null
if cmp -s want.env got.env; then
  ok "the launched engine's environment equals the caller's ($(tr -cd '\0' <want.env | wc -c) variables)"
else
  not_ok "the launched environment differs: $(diff <(tr '\0' '\n' <want.env) <(tr '\0' '\n' <got.env) | head -6)"
fi
# The caller's own OPENBLAS_CORETYPE passes through untouched, too.
env -i "${CALLER[@]}" OPENBLAS_CORETYPE=Prescott "$CALIPER" run \
  --launch "env -0 > '$E2E_TMP/launched2.env'; exit 3" --port 9 --no-telemetry \
  --db "$E2E_TMP/r.db" >/dev/null 2>&1
tr '\0' '\n' <launched2.env | grep -qx 'OPENBLAS_CORETYPE=Prescott' &&
  ok "a caller's OPENBLAS_CORETYPE reaches the engine as set" || not_ok "OPENBLAS_CORETYPE changed"

# One bound on the key (8000 bytes): one byte more is a usage error, naming it.
LONG_KEY=$(head -c 8001 /dev/zero | tr '\0' k) "$CALIPER" run --api-key-env LONG_KEY \
  --url http://127.0.0.1:9 >/dev/null 2>key.err
rc=$?
[ $rc -eq 2 ] && grep -q -- '--api-key-env: "LONG_KEY" holds a 8001-byte key; at most 8000' key.err &&
  ok "an over-long API key is refused, naming the flag" || not_ok "long key: exit $rc: $(cat key.err)"
finish
