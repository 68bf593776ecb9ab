# Shared helpers for end-to-end scripts: source it, call ok/not_ok/check,
# and end with `finish`. Every script runs real processes on loopback only.
set -u
: "${CALIPER:?CALIPER must point at the caliper binary}"
E2E_FAILS=0
E2E_TMP=$(mktemp -d)
E2E_PIDS=()
cleanup_e2e() {
  for p in "${E2E_PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$E2E_TMP"
}
trap cleanup_e2e EXIT
ok()     { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; E2E_FAILS=$((E2E_FAILS + 1)); }
# check "name" command...: ok when the command exits 0
check()  { local n=$1; shift; if "$@"; then ok "$n"; else not_ok "$n"; fi; }
finish() { [ "$E2E_FAILS" -eq 0 ]; exit $?; }
# The platform the binary was built for (linux, darwin, posix: its --version).
cal_platform() { "$CALIPER" --version | sed -n 's/.*(commit [^,]*, \([a-z]*\),.*/\1/p'; }
# need TOOL "what needs it": true when TOOL is on the PATH. Otherwise a
# check that cannot run is no pass: under CI=true (where make deps installed
# every tool) it fails; elsewhere it prints a skip line, counted neither way.
need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "${CI:-}" = true ]; then not_ok "$2: $1 is not installed (make deps installs it)"
  else echo "skip - $2: $1 is not installed (make deps installs it)"; fi
  return 1
}
# skip_unless PLATFORM "what": true when this build is for PLATFORM; else
# prints a skip line naming what needs it (counted neither way) and fails.
skip_unless() {
  local have; have=$(cal_platform)
  [ "$have" = "$1" ] && return 0
  echo "skip - $2: $1 only, this is $have"; return 1
}
# skip_unless_any "PLATFORM..." "what": the same for any of several.
skip_unless_any() {
  local have p; have=$(cal_platform)
  for p in $1; do [ "$have" = "$p" ] && return 0; done
  echo "skip - $2: $1 only, this is $have"; return 1
}

# The waits below poll every 50 ms and end as soon as the thing is ready; their
# bound (2400 polls, two minutes and more) is for a hung process only: under a
# sanitizer on a busy machine a server can take well over 10 s to start.

# start_faultserver PATH: starts tests/helpers/faultserver, waits for its
# "port N" line, sets PORT; fails when it does not start.
start_faultserver() {
  "$1" >"$E2E_TMP/fs.out" 2>&1 &
  local pid=$!
  E2E_PIDS+=($pid)
  local i
  for i in $(seq 1 2400); do
    PORT=$(grep -oE '^port [0-9]+' "$E2E_TMP/fs.out" | cut -d' ' -f2)
    [ -n "$PORT" ] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# start_serve ARGS...: starts `caliper serve --port 0 ARGS`, waits for its
# "listening on http://127.0.0.1:PORT" line, sets SERVE_URL and SERVE_PID.
start_serve() {
  local out="$E2E_TMP/serve.$$.$RANDOM"
  "$CALIPER" serve --port 0 "$@" >"$out" 2>&1 &
  SERVE_PID=$!; E2E_PIDS+=("$SERVE_PID")
  local i
  for i in $(seq 1 2400); do
    SERVE_URL=$(grep -oE 'http://127\.0\.0\.1:[0-9]+' "$out" | head -1)
    [ -n "$SERVE_URL" ] && return 0
    kill -0 "$SERVE_PID" 2>/dev/null || break
    sleep 0.05
  done
  echo "serve did not start:"; cat "$out"; return 1
}
