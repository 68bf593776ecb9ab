#!/usr/bin/env bash
# A short end-to-end smoke test of an installed or unpacked caliper: serve
# the tiny preset, run 4 requests against it, and check the run was stored.
# Usage: scripts/smoke.sh CALIPER_BINARY
set -euo pipefail
bin=${1:?usage: scripts/smoke.sh CALIPER_BINARY}
t=$(mktemp -d)
"$bin" serve --preset tiny --port 0 --threads 1 >"$t/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$t"' EXIT
url=
for _ in $(seq 1 2400); do   # a bound for a hung server only; ends when ready
  url=$(grep -oE 'http://127\.0\.0\.1:[0-9]+' "$t/serve.log" | head -1 || true)
  [ -n "$url" ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.05
done
[ -n "$url" ] || { echo "smoke: serve did not start:"; cat "$t/serve.log"; exit 1; }
grep 'kernels:' "$t/serve.log" || true
"$bin" run --url "$url" --requests 4 --shots 1 --prompt-tokens 8 --max-tokens 8 \
  --no-telemetry --db "$t/s.db" >"$t/run.log" 2>&1 || { echo "smoke: run failed:"; tail -5 "$t/run.log"; exit 1; }
"$bin" runs --db "$t/s.db" | grep -q . || { echo "smoke: no stored run"; exit 1; }
echo "smoke: $("$bin" --version): serve + 4-request run OK"
