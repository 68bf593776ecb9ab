# Helpers for the compat tests (sourced after tests/e2e/lib.sh): a free
# loopback port, and llama-server started on it and waited for.
: "${LLAMA_BIN:?LLAMA_BIN must point at the llama.cpp build/bin}"
: "${NEXT_TOKEN:?NEXT_TOKEN must point at build/compat/next_token}"
COMPAT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_llama MODEL [ARGS...]: llama-server on a free port, 2 threads; sets
# LLAMA_URL, LLAMA_PID, LLAMA_LOG once /health answers 200.
start_llama() {
  local model=$1; shift
  local port; port=$(free_port)
  LLAMA_LOG="$E2E_TMP/llama.$port.log"
  "$LLAMA_BIN/llama-server" -m "$model" --host 127.0.0.1 --port "$port" -t 2 -tb 2 \
    --no-webui "$@" >"$LLAMA_LOG" 2>&1 &
  LLAMA_PID=$!; E2E_PIDS+=("$LLAMA_PID")
  local i
  for i in $(seq 1 1200); do
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
      LLAMA_URL="http://127.0.0.1:$port"; return 0
    fi
    kill -0 "$LLAMA_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "llama-server did not start:"; tail -20 "$LLAMA_LOG"; return 1
}

stop_llama() {
  [ -n "${LLAMA_PID:-}" ] && kill "$LLAMA_PID" 2>/dev/null && wait "$LLAMA_PID" 2>/dev/null
  LLAMA_PID=
}
