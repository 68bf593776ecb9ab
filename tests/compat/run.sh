#!/usr/bin/env bash
# make compat: build (or reuse) llama.cpp's llama-server and llama-bench
# (scripts/compat-build.sh), then run every tests/compat/test_*.sh against
# them and print "N passed, N failed". Exits 1 when npm cannot be reached
# the first time, when the build fails, or when a test fails.
set -u
BUILD=${1:?usage: tests/compat/run.sh BUILD_DIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
bin=$(bash scripts/compat-build.sh)
rc=$?
if [ $rc -eq 3 ]; then
  echo "make compat: cannot reach the npm registry to fetch node-llama-cpp (llama.cpp's" >&2
  echo "  source); nothing is cached yet. Connect to the network once, or set" >&2
  echo "  CALIPER_COMPAT_CACHE to a directory holding a built llama.cpp-<version>/." >&2
  exit 1
elif [ $rc -ne 0 ] || [ ! -x "$bin/llama-server" ]; then
  echo "make compat: building llama.cpp failed (exit $rc)" >&2
  exit 1
fi
export LLAMA_BIN=$bin CALIPER=$BUILD/caliper BUILD NEXT_TOKEN=$BUILD/compat/next_token
echo "make compat: llama.cpp from $bin"
pass=0; fail=0; failed=()
log=$(mktemp); trap 'rm -f "$log"' EXIT
for t in tests/compat/test_*.sh; do
  echo "== compat ${t##*/}"
  timeout 1500 bash "$t" >"$log" 2>&1; trc=$?
  cat "$log"
  p=$(grep -c '^ok ' "$log"); f=$(grep -c '^not ok ' "$log")
  if [ $trc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  pass=$((pass + p)); fail=$((fail + f))
  [ "$f" -gt 0 ] && failed+=("${t##*/}")
done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
