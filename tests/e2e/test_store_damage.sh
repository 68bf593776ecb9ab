#!/usr/bin/env bash
# A damaged stored protocol is said, never dropped in silence. Once, after
# `update runs set protocol='{'`, show was unchanged, export gave
# "protocol": null and compare printed every ratio against it; a seed of
# 2^64 dropped the whole record, shots "five" and max_tokens -4 were
# ignored and concurrency [2147483648] was truncated. Now the reader names
# the first damaged field with its value; show prints it, export keeps the
# stored text and says so, compare refuses the run's ratios (--force prints
# them with the damage beside them), and an intact run reads as before.
. "$(dirname "$0")/lib.sh"
T=$E2E_TMP
need sqlite3 "damaging a stored run" || finish
need jq "reading the export" || finish
FS=${BUILD:-build}/tests/helpers/faultserver
start_faultserver "$FS" || { not_ok "fault server started"; finish; }
for l in A B; do
  "$CALIPER" run --url "http://127.0.0.1:$PORT" --shots 3 --requests 4 --prompt-tokens 32 \
    --max-tokens 8 --no-telemetry --label $l --db "$T/base.db" >/dev/null 2>"$T/run.err" ||
    { not_ok "run $l stored"; cat "$T/run.err"; finish; }
done
"$CALIPER" show 1 --db "$T/base.db" >"$T/show1"
if grep -q damaged "$T/show1"; then not_ok "an intact run is not called damaged"
else ok "an intact run is not called damaged"; fi
"$CALIPER" compare 1 2 --db "$T/base.db" >"$T/cmp0" 2>&1
check "two intact runs of one protocol compare (ratios printed)" grep -q '[0-9]× (CI' "$T/cmp0"

# damage NAME SQL-EXPRESSION FIELD TEXT: run 2's protocol set to the
# expression; show, export and compare must name FIELD, show TEXT
damage() {
  local name=$1 expr=$2 field=$3 text=$4 db=$T/$1.db
  cp "$T/base.db" "$db"
  sqlite3 "$db" "update runs set protocol = $expr where id = 2"
  "$CALIPER" show 2 --db "$db" >"$T/$name.show" 2>&1
  check "$name: show says run 2's protocol is damaged: $text" \
    grep -qF "damaged: run 2's stored protocol cannot be read whole: $text" "$T/$name.show"
  "$CALIPER" export 2 --json --db "$db" >"$T/$name.json" 2>"$T/$name.err"
  check "$name: export says so on stderr" grep -qF "run 2's stored protocol is damaged: $text" "$T/$name.err"
  check "$name: export names the field in protocol_damage" \
    jq -e --arg f "$field" '.run.protocol_damage.field == $f' "$T/$name.json" >/dev/null
  check "$name: export keeps what was stored" \
    jq -e '.run.protocol != null' "$T/$name.json" >/dev/null
  "$CALIPER" compare 1 2 --db "$db" >"$T/$name.cmp" 2>&1; rc=$?
  check "$name: compare refuses every ratio (exit $rc)" \
    sh -c "[ $rc -eq 1 ] && grep -q '^0 ratios between matching protocols' '$T/$name.cmp'"
  check "$name: compare names the damaged field" \
    grep -qF "not comparable: stored protocol intact vs damaged ($field)" "$T/$name.cmp"
  check "$name: compare says why under the table" \
    grep -qF "! B: its stored protocol is damaged: $text" "$T/$name.cmp"
  "$CALIPER" compare 1 2 --db "$db" --force >"$T/$name.force" 2>&1
  check "$name: --force prints the ratio with the damage beside it" \
    sh -c "grep -F 'FORCED, differs: stored protocol intact vs damaged ($field)' '$T/$name.force' | grep -q '[0-9]× '"
  "$CALIPER" compare 1 "$T/$name.json" --db "$db" >"$T/$name.cmpf" 2>&1
  check "$name: its export, compared as a file, is refused the same way" \
    grep -qF "damaged ($field)" "$T/$name.cmpf"
}
damage notjson "'{'" protocol 'protocol: "{" is not a JSON object'
damage seed "replace(json_set(protocol, '\$.seed', 0), '\"seed\":0', '\"seed\":18446744073709551616')" \
  protocol.seed 'protocol.seed: 18446744073709551616 (too large to read) is not an integer in [0, 2^64)'
damage shots "json_set(protocol, '\$.shots', 'five')" protocol.shots \
  'protocol.shots: "five" is not an integer in [0, 1000000000]'
damage maxtok "json_set(protocol, '\$.max_tokens', -4)" protocol.max_tokens \
  'protocol.max_tokens: -4 is not an integer in [0, 1000000000]'
damage conc "json_set(protocol, '\$.concurrency', json('[2147483648]'))" 'protocol.concurrency[0]' \
  'protocol.concurrency[0]: 2147483648 is not an integer in [0, 2147483647]'
# the rest of a record with one damaged field still reads: its shots table
check "seed: the rest of the record still reads (warm-up 0 in the show)" \
  grep -q 'warm' "$T/seed.show"

# two runs damaged alike are no more comparable than one: what each held
# is not known
cp "$T/base.db" "$T/both.db"
sqlite3 "$T/both.db" "update runs set protocol = '{'"
"$CALIPER" compare 1 2 --db "$T/both.db" >"$T/both.cmp" 2>&1
check "two runs damaged alike are refused too" grep -q '^0 ratios between matching protocols' "$T/both.cmp"
finish
