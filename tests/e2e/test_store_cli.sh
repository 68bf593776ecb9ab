#!/usr/bin/env bash
# The store from the command line: reading commands open it read-only (a
# mistyped --db creates nothing and says "no such store", exit 1; a store in
# a read-only directory is still listed); empty arguments are usage errors
# (exit 2) naming the argument; a password given in --url reaches the server
# but never the store, show, export, the report or the progress lines; a
# label that is not UTF-8 is refused at input.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
T=$E2E_TMP

# --- a missing store: said so, exit 1, and nothing created ------------------
cd "$T" || exit 1
for cmd in "runs" "show 1" "export 1 --json" "report 1 -o $T/r.html" "compare 1 2"; do
  # shellcheck disable=SC2086
  "$CALIPER" $cmd --db typo.db >"$T/out" 2>"$T/err"
  rc=$?
  if [ $rc -eq 1 ] && grep -q "no such store: typo.db" "$T/err" && [ ! -e typo.db ]; then
    ok "$cmd --db typo.db: exit 1, \"no such store\", no file created"
  else
    not_ok "$cmd --db typo.db: rc $rc, $(head -c 200 "$T/err"), file: $(ls typo.db* 2>&1)"
    rm -f typo.db typo.db-wal typo.db-shm
  fi
done

"$CALIPER" fit prefill 1 --db typo.db >/dev/null 2>&1
check "fit RUN --db typo.db creates no file either" [ ! -e typo.db ]

# --- empty arguments are usage errors naming the argument --------------------
for cmd in runs "show 1" "export 1 --csv" "report 1" "compare 1 2" "run --requests 1"; do
  # shellcheck disable=SC2086
  "$CALIPER" $cmd --db "" >/dev/null 2>"$T/err"
  rc=$?
  check "$cmd --db \"\": exit 2 naming --db (rc $rc)" bash -c "[ $rc -eq 2 ] && grep -q -- '--db: \"\" is empty' '$T/err'"
done
for cmd in show "export --json"; do
  # shellcheck disable=SC2086
  "$CALIPER" $cmd "" --db typo.db >/dev/null 2>"$T/err"
  rc=$?
  check "$cmd \"\": exit 2 naming RUN, not \"not an error\" (rc $rc)" \
    bash -c "[ $rc -eq 2 ] && grep -q 'RUN: \"\" is empty' '$T/err' && ! grep -q 'not an error' '$T/err'"
done
check "no file was created by any of them" bash -c "! ls '$T'/typo.db* 2>/dev/null"

# --- a label that is not UTF-8 is refused before anything runs --------------
"$CALIPER" run --label "$(printf 'v1-\377')" --db "$T/l.db" >/dev/null 2>"$T/err"
rc=$?
check "run --label with a byte 0xff: exit 2 naming --label and UTF-8 (rc $rc)" \
  bash -c "[ $rc -eq 2 ] && grep -q -- '--label: byte 4 is not valid UTF-8' '$T/err'"
check "and no store was created for it" [ ! -e "$T/l.db" ]

# --- credentials in --url: used, never stored or printed ---------------------
PW=Pa55w0rdXyzzy
DB=$T/s.db
if start_serve --preset tiny; then
  port=${SERVE_URL##*:}
  url="http://alice:$PW@127.0.0.1:$port"
  "$CALIPER" run --url "$url" --requests 2 --max-tokens 4 --prompt-tokens 16 --label creds \
    --db "$DB" --no-telemetry --json "$T/run.json" >"$T/run.out" 2>"$T/run.err"
  rc=$?
  check "run --url with user:password against serve exits 0 (rc $rc)" [ $rc -eq 0 ]
  "$CALIPER" runs --db "$DB" >"$T/runs" 2>&1
  check "runs shows the target without credentials" grep -q "http://127.0.0.1:$port" "$T/runs"
  "$CALIPER" show creds --db "$DB" >"$T/show" 2>&1
  "$CALIPER" export creds --json --db "$DB" >"$T/exp.json" 2>&1
  "$CALIPER" export creds --csv --db "$DB" >"$T/exp.csv" 2>&1
  "$CALIPER" report creds --db "$DB" -o "$T/rep.html" 2>"$T/rep.err"
  "$CALIPER" report creds --db "$DB" --format md >"$T/rep.md" 2>&1
  "$CALIPER" report creds --db "$DB" --format json >"$T/rep.json" 2>&1
  check "export --json names the URL without credentials" grep -q "http://127.0.0.1:$port" "$T/exp.json"
  for f in "$DB" "$DB-wal" runs show exp.json exp.csv rep.html rep.md rep.json run.out run.err run.json; do
    case $f in /*) p=$f ;; *) p=$T/$f ;; esac
    [ -e "$p" ] || continue
    check "the password is absent from $f" bash -c "! grep -aq -e '$PW' -e 'alice' '$p'"
  done
  # a target that does not answer: the error line must not carry it either
  "$CALIPER" run --url "http://bob:$PW@127.0.0.1:1" --requests 1 --db "$DB" --no-telemetry \
    --connect-timeout 1s >"$T/dead.out" 2>&1
  check "a failing --url target's messages carry no password" bash -c "! grep -aq '$PW' '$T/dead.out'"
  check "nor does the store after it" bash -c "! grep -aq '$PW' '$DB'"
else
  not_ok "serve started"
fi

# --- a store in a directory this user cannot write is listed ------------------
# As root permission bits stop nothing, so the listing runs as nobody.
RO=$T/ro
mkdir -p "$RO"
cp "$DB" "$RO/s.db" 2>/dev/null || "$CALIPER" run --url "$SERVE_URL" --requests 1 --db "$RO/s.db" --no-telemetry >/dev/null 2>&1
chmod 0444 "$RO/s.db"; chmod 0555 "$RO"; chmod 0755 "$T"
as_user=()
if [ "$(id -u)" -eq 0 ]; then
  if command -v setpriv >/dev/null; then as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups); fi
fi
if [ "$(id -u)" -ne 0 ] || [ ${#as_user[@]} -gt 0 ]; then
  "${as_user[@]}" "$CALIPER" runs --db "$RO/s.db" >"$T/ro.out" 2>"$T/ro.err"
  rc=$?
  check "runs lists a store in a read-only directory (rc $rc: $(head -c 200 "$T/ro.err"))" \
    bash -c "[ $rc -eq 0 ] && grep -q ' creds ' '$T/ro.out'"
  "${as_user[@]}" "$CALIPER" show creds --db "$RO/s.db" >/dev/null 2>"$T/ro.err"
  check "show reads it too (rc $?)" [ -z "$(cat "$T/ro.err")" ]
  check "and nothing was written beside it" [ "$(ls "$RO")" = "s.db" ]
else
  ok "# skip read-only directory: root without setpriv"
fi
chmod 0755 "$RO"
finish
