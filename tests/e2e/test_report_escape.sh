#!/usr/bin/env bash
# A server's error body reaches the reports as text, never as markup: the
# fault server answers 500 with an HTML body holding <img onerror> and
# Markdown; the run stores it in its failure verdict; the Markdown report
# escapes it (HTML as entities, Markdown markup backslash-escaped) and the
# HTML report as entities.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
T=$E2E_TMP
FS="$BUILD/tests/helpers/faultserver"
[ -x "$FS" ] || { not_ok "the fault server is built ($FS)"; finish; }
"$FS" >"$T/fs.out" 2>&1 &
E2E_PIDS+=($!)
for _ in $(seq 1 2400); do
  PORT=$(grep -oE '^port [0-9]+' "$T/fs.out" | cut -d' ' -f2)
  [ -n "$PORT" ] && break
  sleep 0.05
done
[ -n "${PORT:-}" ] || { not_ok "fault server starts"; finish; }

timeout 60 "$CALIPER" run --url "http://127.0.0.1:$PORT/500html" --api completions --model m \
  --requests 2 --max-tokens 8 --prompt-tokens 16 --no-telemetry --db "$T/e.db" --label esc \
  >"$T/run.out" 2>&1
check "the run fails its requests (exit 1)" [ $? -eq 1 ]
check "the failure verdict carries the server's body" grep -q 'onerror=alert(1)' "$T/run.out"

"$CALIPER" report esc --db "$T/e.db" --format md >"$T/r.md" 2>/dev/null
check "markdown: written" [ -s "$T/r.md" ]
if grep -q '<img\|<html' "$T/r.md"; then not_ok "markdown: no raw HTML from the server"
else ok "markdown: no raw HTML from the server"; fi
check "markdown: the body is there as text" \
  grep -qF '&lt;html&gt;&lt;img src=x onerror=alert(1)&gt; \*boom\* \[x\](javascript:y) \| z&lt;/html&gt;' "$T/r.md"

"$CALIPER" report esc --db "$T/e.db" -o "$T/r.html" 2>/dev/null
if grep -q '<img src=x\|<html><img' "$T/r.html"; then not_ok "html: no raw HTML from the server"
else ok "html: no raw HTML from the server"; fi
check "html: the body is there as entities" grep -qF '&lt;img src=x onerror=alert(1)&gt;' "$T/r.html"
finish
