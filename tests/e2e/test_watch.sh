#!/usr/bin/env bash
# caliper watch against the built-in engine while a few streamed requests
# run: the summary shows time with requests running, the JSON agrees with
# it, --pid fits a memory slope, Ctrl-C prints the summary and exits 0, and
# bad flags exit 2 naming the flag and the value. Pacing mode (--pace-ms)
# makes each request last at least a known time: 100 chunks x 20 ms = 2 s.
# Nothing here depends on how fast the machine is: the load starts once the
# watch is scraping, the watch ends with Ctrl-C once the load is done, and
# Ctrl-C comes after the scrapes a summary needs.
. "$(dirname "$0")/lib.sh"
need jq "reading the watch JSON" || finish

start_serve --preset tiny --pace-ms 20 || { not_ok "serve started"; finish; }
req() { curl -sN "$SERVE_URL/v1/completions" -H 'Content-Type: application/json' \
          -d '{"prompt":"hello","max_tokens":100,"stream":true}' >/dev/null; }
out=$E2E_TMP/watch.out; js=$E2E_TMP/watch.json
"$CALIPER" watch "$SERVE_URL" --interval 50ms --pid "$SERVE_PID" --ceiling 16 \
  --json "$js" >"$out" 2>"$E2E_TMP/watch.err" &
w=$!
# the watch prints this line just before its first scrape
for i in $(seq 1 2400); do
  grep -q 'scraping' "$E2E_TMP/watch.err" && break; kill -0 "$w" 2>/dev/null || break; sleep 0.05
done
# three at once, then one: at least 2 s each, 4 s with requests running
req & r1=$!; req & r2=$!; req & r3=$!
wait "$r1" "$r2" "$r3"
req
kill -INT "$w"; wait "$w"; rc=$?
check "watch exits 0 on Ctrl-C after the load" [ "$rc" -eq 0 ]
cat "$out"
check "summary names the gauge" grep -q 'vllm:num_requests_running' "$out"
check "summary has the verdict" grep -q 'benchmark at concurrency' "$out"
check "summary states the ceiling is not the operating point" grep -q 'ceiling of 16 is a ceiling' "$out"
busy=$(jq '.running.busy_s' "$js")
jqe() { jq -e "$@" >/dev/null; }
# the requests ran at least 4 s between the watch's first and last
# readings; a reading every 50 ms, held until the next, can shave a
# transition or two, never seconds
check "requests ran most of the time (busy $busy s)" jqe '.running.busy_s >= 3 and .running.busy_s <= .watched_s' "$js"
check "three ran at once at some point" jqe '.running.max >= 3' "$js"
check "idle share and busy time agree" \
  jqe '((1 - .running.share["0"]) * .watched_s - .running.busy_s | fabs) < 0.01' "$js"
check "histogram seconds add up to the watched time" \
  jqe '([.running.histogram[].seconds] | add) - .watched_s | fabs < 0.01' "$js"
check "watched at least from the first reading to the last" \
  jqe '.timeline as $t | .watched_s >= ($t[-1][0] - $t[0][0]) - 0.01 and .watched_s > 0' "$js"
# --duration: the watch covers its first reading to the end of it (or to
# the last reading, if that came later): exact from the timeline, whatever
# the first scrape cost on a busy machine
"$CALIPER" watch "$SERVE_URL" --interval 50ms --duration 1s --json "$E2E_TMP/d.json" \
  >/dev/null 2>&1; rc=$?
check "watch --duration exits 0" [ "$rc" -eq 0 ]
check "watched from the first reading to the end of 1 s" \
  jqe '.timeline as $t | ((([1, $t[-1][0]] | max) - $t[0][0]) - .watched_s | fabs) < 0.01 and .watched_s > 0' "$E2E_TMP/d.json"
check "waiting gauge found" jqe '.waiting.gauge == "vllm:num_requests_waiting"' "$js"
# a process's RSS comes from the platform's readings (none on posix)
if skip_unless_any "linux darwin" "--pid RSS readings"; then
check "pid readings and a slope" jqe '.processes[0].readings >= 20 and (.processes[0].slope_bytes_per_s | type) == "number"' "$js"
check "pid line printed" grep -qE "pid +$SERVE_PID +rss .* slope .* MB/min" "$out"
fi

# --metric override and a metric that is not there
"$CALIPER" watch "$SERVE_URL" --interval 50ms --duration 200ms --metric caliper:num_requests_running \
  >"$E2E_TMP/m.out" 2>&1
check "--metric override used" grep -q 'gauge      caliper:num_requests_running' "$E2E_TMP/m.out"
"$CALIPER" watch "$SERVE_URL" --duration 200ms --metric nope:x >/dev/null 2>"$E2E_TMP/m.err"; rc=$?
check "absent --metric exits 1 naming it" sh -c "[ $rc -eq 1 ] && grep -q 'nope:x' '$E2E_TMP/m.err'"

# nothing listening: exit 1
"$CALIPER" watch http://127.0.0.1:9 --duration 200ms >/dev/null 2>"$E2E_TMP/c.err"; rc=$?
check "unreachable server exits 1" [ "$rc" -eq 1 ]

# A running gauge that is NaN or negative is no reading: a server that
# answers with the captured scrapes tests/data/metrics/vllm.prom (3 running)
# and, every other scrape, the same with the gauge NaN or -1. Read as 0,
# they made half the time "idle"; rejected, every second held 3 running.
if need python3 "the fake /metrics server"; then
  MDIR=$(cd "$(dirname "$0")/../data/metrics" && pwd)
  python3 - "$MDIR" "$E2E_TMP/scrapes" >"$E2E_TMP/fake.port" 2>"$E2E_TMP/fake.err" <<'PY' &
import http.server, os, sys, threading
d = sys.argv[1]
files = {n: open(os.path.join(d, n), "rb").read()
         for n in ("vllm.prom", "vllm_running_nan.prom", "vllm_running_negative.prom",
                   "vllm_running_huge.prom", "vllm_running_duplicate.prom",
                   "vllm_running_million.prom", "vllm_running_fraction.prom",
                   "vllm_waiting_negative.prom")}
cycle = ["vllm.prom", "vllm_running_nan.prom", "vllm.prom", "vllm_running_negative.prom"]
n = {"mixed": 0, "count": 0}
count_file = sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path == "/mixed/metrics":
            body = files[cycle[n["mixed"] % len(cycle)]]; n["mixed"] += 1
        elif self.path == "/nan/metrics":
            body = files["vllm_running_nan.prom"]
        elif self.path == "/huge/metrics":
            body = files["vllm_running_huge.prom"]
        elif self.path == "/dup/metrics":
            body = files["vllm_running_duplicate.prom"]
        elif self.path == "/million/metrics":   # every other scrape 1e6 running
            body = files["vllm_running_million.prom" if n["mixed"] % 2 else "vllm.prom"]
            n["mixed"] += 1
        elif self.path == "/fraction/metrics":
            body = files["vllm_running_fraction.prom"]
        elif self.path == "/waitneg/metrics":
            body = files["vllm_waiting_negative.prom"]
        elif self.path == "/count/metrics":
            # each scrape counted in a file, written after the answer: the
            # scraper holds every reading before the count passes it
            body = files["vllm.prom"]
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers(); self.wfile.write(body); self.wfile.flush()
            n["count"] += 1
            open(count_file + ".tmp", "w").write("%d\n" % n["count"])
            os.replace(count_file + ".tmp", count_file)
            return
        else:
            self.send_error(404); return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
  E2E_PIDS+=("$!")
  for i in $(seq 1 2400); do [ -s "$E2E_TMP/fake.port" ] && break; sleep 0.05; done
  FAKE=http://127.0.0.1:$(head -1 "$E2E_TMP/fake.port")

  # Ctrl-C: the summary still comes, exit 0. Sent once the third scrape is
  # answered, so two readings are in, however slow the machine.
  "$CALIPER" watch "$FAKE/count" --interval 50ms >"$E2E_TMP/int.out" 2>/dev/null &
  w=$!
  for i in $(seq 1 2400); do
    [ "$(cat "$E2E_TMP/scrapes" 2>/dev/null || echo 0)" -ge 3 ] && break
    kill -0 "$w" 2>/dev/null || break; sleep 0.05
  done
  kill -INT "$w"; wait "$w"; rc=$?
  check "Ctrl-C exits 0" [ "$rc" -eq 0 ]
  check "Ctrl-C prints the summary" grep -q 'verdict' "$E2E_TMP/int.out"
  "$CALIPER" watch "$FAKE/mixed" --interval 50ms --duration 1s --json "$E2E_TMP/nan.json" \
    >"$E2E_TMP/nan.out" 2>"$E2E_TMP/nan.err"; rc=$?
  check "watch over NaN/negative readings exits 0" [ "$rc" -eq 0 ]
  cat "$E2E_TMP/nan.err"
  nrej=$(grep -c 'reading rejected: vllm:num_requests_running is .* not a count in \[0, 1e9\]' "$E2E_TMP/nan.err")
  check "each bad reading warned about, counted ($nrej)" \
    sh -c "[ $nrej -ge 2 ] && grep -q '; $nrej rejected so far)' '$E2E_TMP/nan.err'"
  check "the JSON counts the same rejected readings" jqe ".rejected_readings == $nrej" "$E2E_TMP/nan.json"
  check "the good readings alone make the histogram: 3 running all the time" \
    jqe '.running.share["0"] == 0 and .running.max == 3 and .running.p50 == 3' "$E2E_TMP/nan.json"
  check "the summary says readings were rejected" grep -q "$nrej rejected: the gauge was NaN, negative, out of its range" "$E2E_TMP/nan.out"
  # 1e308 running is a broken exporter, not "4096+ requests"
  "$CALIPER" watch "$FAKE/huge" --interval 50ms --duration 300ms >/dev/null 2>"$E2E_TMP/huge.err"; rc=$?
  check "a running gauge of 1e308 is rejected, naming it and its line" \
    sh -c "[ $rc -eq 1 ] && grep -q 'vllm:num_requests_running is 1e+308 on line 8, not a count in \[0, 1e9\]' '$E2E_TMP/huge.err'"
  # what the histogram cannot hold is refused and counted, never clamped:
  # 1e6 running read as 4096 made the advice "benchmark at concurrency 4096"
  "$CALIPER" watch "$FAKE/million" --interval 50ms --duration 1s --json "$E2E_TMP/mil.json" \
    >"$E2E_TMP/mil.out" 2>"$E2E_TMP/mil.err"; rc=$?
  nmil=$(grep -c 'vllm:num_requests_running is 1e+06 (1 label set summed), above the 65536 requests' "$E2E_TMP/mil.err")
  check "a running gauge of 1e6 is rejected, naming it and the limit ($nmil, rc $rc)" \
    sh -c "[ $rc -eq 0 ] && [ $nmil -ge 1 ]"
  check "... counted in the JSON" jqe ".rejected_readings == $nmil" "$E2E_TMP/mil.json"
  check "... and never the operating point: 3 running, the advice 3" \
    sh -c "jq -e '.running.max == 3' '$E2E_TMP/mil.json' >/dev/null && grep -q 'benchmark at concurrency 3\$' '$E2E_TMP/mil.out'"
  # an averaged gauge of 3.7 is shown as read, not as 4
  "$CALIPER" watch "$FAKE/fraction" --interval 50ms --duration 500ms --json "$E2E_TMP/frac.json" \
    >"$E2E_TMP/frac.out" 2>/dev/null; rc=$?
  check "a gauge of 3.7: mean and max as read (rc $rc)" \
    sh -c "grep -q 'running    mean 3.70 .* max 3.7 ' '$E2E_TMP/frac.out' && jq -e '.running.max == 3.7 and (.running.mean - 3.7 | fabs) < 1e-9' '$E2E_TMP/frac.json' >/dev/null"
  check "... its readings named as not whole numbers" grep -q 'were not whole numbers (first 3.7): kept as read' "$E2E_TMP/frac.out"
  # a waiting gauge of -1e308 is there but not a count: rejected, not "not exposed"
  "$CALIPER" watch "$FAKE/waitneg" --interval 50ms --duration 500ms --json "$E2E_TMP/wn.json" \
    >"$E2E_TMP/wn.out" 2>"$E2E_TMP/wn.err"; rc=$?
  check "waiting -1e308: every reading rejected, never 'not exposed' (rc $rc)" \
    sh -c "grep -q 'waiting    vllm:num_requests_waiting: every reading rejected' '$E2E_TMP/wn.out' && ! grep -q 'not exposed' '$E2E_TMP/wn.out'"
  check "... each named on stderr with its line" grep -q 'vllm:num_requests_waiting is -1e+308 on line 11, not a count' "$E2E_TMP/wn.err"
  check "... and counted in the JSON" jqe '.waiting.rejected_readings >= 2' "$E2E_TMP/wn.json"
  # one series listed twice is refused, never summed into 6 running
  "$CALIPER" watch "$FAKE/dup" --interval 50ms --duration 300ms >/dev/null 2>"$E2E_TMP/dup.err"; rc=$?
  check "a series given twice refuses the scrape, naming the metric and both lines" \
    sh -c "[ $rc -eq 1 ] && grep -q 'line 9: vllm:num_requests_running repeats the label set of line 8' '$E2E_TMP/dup.err'"
  "$CALIPER" watch "$FAKE/nan" --interval 50ms --duration 500ms >/dev/null 2>"$E2E_TMP/nan2.err"; rc=$?
  check "only NaN readings: exit 1, saying so" \
    sh -c "[ $rc -eq 1 ] && grep -q 'fewer than two valid readings' '$E2E_TMP/nan2.err'"
fi

# usage errors name flag and value
bad() { local want=$1; shift; "$CALIPER" watch "$@" >/dev/null 2>"$E2E_TMP/u.err"; local rc=$?
        if [ $rc -eq 2 ] && grep -qF -- "$want" "$E2E_TMP/u.err"; then ok "usage: $want"; else
        not_ok "usage: $want (rc $rc: $(cat "$E2E_TMP/u.err"))"; fi; }
bad '--interval: "0.001ms"' "$SERVE_URL" --interval 0.001ms
bad '--duration: "soon"' "$SERVE_URL" --duration soon
bad '--pid: "0"' "$SERVE_URL" --pid 0
bad '--ceiling: "-3"' "$SERVE_URL" --ceiling -3
bad 'URL: "ftp://x"' ftp://x
bad 'URL: missing' --interval 1s
check "--help exits 0" "$CALIPER" watch --help
finish
