#!/usr/bin/env bash
# caliper serve's memory: a KV cache reserved beyond the host's physical
# memory is refused, naming the sizes and the flag that asks for it
# (--kv-overcommit); asked for, it is reserved and touched only as
# positions fill, each sequence in its own slot's pages: one 1000-token
# prompt in a server of 64 slots grows the process by its own slot's pages,
# not by every slot's (laid out layer by layer across slots, each 2 MiB
# page a prompt touched held every slot's positions of that layer). A
# quantized file is held at its own size.
. "$(dirname "$0")/lib.sh"
T=$E2E_TMP
serve_log() { ls -t "$E2E_TMP"/serve.* | head -1; }
cd "$T" || exit 1

rss_kb() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status"; }
complete() { # PROMPT_BYTES: one completion of that many bytes (one token each), 1 token out
  local body
  body=$(python3 -c 'import json,sys; print(json.dumps({"prompt": "ab" * (int(sys.argv[1]) // 2), "max_tokens": 1, "temperature": 0}))' "$1")
  curl -sf --max-time 300 "$SERVE_URL/v1/completions" -H 'Content-Type: application/json' -d "$body" >/dev/null
}

# a model whose positions are dear: 64 layers of 4 KV heads of 64, 128 KiB
# of KV cache a position, in a 5 MB file
"$CALIPER" serve --preset tiny --dim 256 --layers 64 --heads 4 --kv-heads 4 --ffn 32 \
  --vocab 512 --dtype q8_0 --export-gguf wide.gguf 2>"$T/err" || { not_ok "export"; cat "$T/err"; }
mem_kb=$(sed -n 's/^MemTotal:[[:space:]]*\([0-9]*\) kB/\1/p' /proc/meminfo)
# the least power-of-two context whose 16 slots reserve 1.25x this host's memory
ctx=$(python3 -c 'import sys; m = int(sys.argv[1]) * 1024; c = 1
while 16 * c * 131072 < 1.25 * m: c *= 2
print(c)' "$mem_kb")
if [ "$ctx" -le 1048576 ]; then
  timeout 120 "$CALIPER" serve --model wide.gguf --context "$ctx" --port 0 >/dev/null 2>"$T/err"; rc=$?
  check "a KV cache beyond physical memory (16 x $ctx positions) is refused with exit 2 (rc $rc)" [ "$rc" -eq 2 ]
  check "... naming the reservation, the host's memory and the flag" \
    grep -qE "the KV cache would reserve [0-9.]+ [GT]B \(16 sequences of $ctx positions\) .* more than this host's [0-9.]+ GB of memory: .*--kv-overcommit" "$T/err"
  check "... and what would fit" grep -qE -- "--context: [0-9]+ fit 16 sequences" "$T/err"
  if start_serve --model wide.gguf --context "$ctx" --kv-overcommit; then
    check "--kv-overcommit reserves it" grep -q "16 sequences of $ctx positions, touched as they fill" "$(serve_log)"
    idle=$(rss_kb "$SERVE_PID")
    check "... and it costs nothing until used (RSS ${idle} kB)" [ "$idle" -lt $((256 * 1024)) ]
    complete 600
    check "... and a prompt is served from it" [ $? -eq 0 ]
    kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
  else not_ok "serve --kv-overcommit starts"; fi
else
  echo "skip - this host's memory ($mem_kb kB) is beyond what 16 x 2^20 positions reserve"
fi

# one sequence touches its own slot's pages: 64 slots of tiny at 1024
# positions (256 KiB of keys a layer a slot; 2 MiB pages would hold 8
# slots' keys of a layer), one 1000-token prompt
"$CALIPER" serve --preset tiny --export-gguf tiny.gguf 2>/dev/null
if start_serve --model tiny.gguf --context 1024 --max-batch 64; then
  before=$(rss_kb "$SERVE_PID")
  complete 1000
  after=$(rss_kb "$SERVE_PID")
  grow=$((after - before))
  echo "# one 1000-token prompt of 64 slots: RSS $before -> $after kB"
  check "one prompt grows RSS by its own slot's pages, at most 10 MiB (+$grow kB)" [ "$grow" -le 10240 ]
  kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
else not_ok "serve --max-batch 64 starts"; fi

# a Q4_K_M file is held at its size: the bytes held within 1.05x of the
# file's, and the process after start within 1.2x of file + KV reserved
"$CALIPER" serve --preset small --ffn 1536 --export-gguf mix.gguf --dtype q4_k_m 2>/dev/null \
  || not_ok "export small q4_k_m"
if start_serve --model mix.gguf --max-batch 4; then
  line=$(grep "weights held as" "$(serve_log)")
  echo "# $line"
  rss=$(rss_kb "$SERVE_PID")
  file=$(stat -c %s mix.gguf)
  kv=$(sed -n 's/.*KV cache \([0-9.]*\) MB reserved.*/\1/p' <<<"$line")
  echo "# RSS after start $((rss / 1024)) MiB; file $((file / 1048576)) MiB, KV reserved $kv MB"
  check "a Q4_K_M file held as stored: RSS ${rss} kB within 1.2x of file + KV" python3 -c '
import sys; rss, f, kv = int(sys.argv[1]) * 1024, int(sys.argv[2]), float(sys.argv[3]) * 1e6
assert rss <= 1.2 * (f + kv), (rss, f, kv)' "$rss" "$file" "$kv"
  kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
else not_ok "serve --model mix.gguf starts"; fi
finish
