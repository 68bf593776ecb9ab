#!/usr/bin/env bash
# caliper serve end to end over loopback: startup time, streamed and plain
# completions and chat (chunks parsed, usage counted), concurrent requests
# batched together, a mid-stream disconnect freeing its slot, every error
# status, /metrics, /tokenize, /profile, pacing mode, clean shutdown.
. "$(dirname "$0")/lib.sh"
PY="$E2E_TMP/sv.py"
cat >"$PY" <<'EOF'
# A small raw-socket client: the tests need to read chunk by chunk, time
# arrivals and hang up mid-stream, which curl cannot do one step at a time.
import json, socket, sys, time, threading

def url_parts(u):
    hp = u.split("//", 1)[1]
    h, p = hp.split(":")
    return h, int(p)

def post(u, path, body, read=True, hold=None):
    """hold: a threading.Barrier to wait on before the last byte goes out,
    so several requests reach the server together."""
    h, p = url_parts(u)
    s = socket.create_connection((h, p))
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (path.encode(), len(data)) + data)
    if hold is not None:
        s.sendall(req[:-1]); hold.wait(); req = req[-1:]
    s.sendall(req)
    return s

class Reader:
    """Reads an HTTP/1.1 response; yields SSE data payloads with arrival times."""
    def __init__(self, s):
        self.s, self.buf = s, b""
        self.status, self.headers = None, {}
    def _fill(self):
        d = self.s.recv(65536)
        if not d: raise EOFError
        self.buf += d
    def head(self):
        while b"\r\n\r\n" not in self.buf: self._fill()
        h, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = h.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        for l in lines[1:]:
            k, v = l.split(":", 1)
            self.headers[k.strip().lower()] = v.strip()
        self.chunked = self.headers.get("transfer-encoding", "") == "chunked"
        self.body = b""
        return self.status
    def _chunk(self):
        # one HTTP chunk into self.body; False at the end
        if not self.chunked:
            self.body += self.buf; self.buf = b""
            try: self._fill()
            except EOFError: return False
            return True
        while b"\r\n" not in self.buf: self._fill()
        ln, rest = self.buf.split(b"\r\n", 1)
        n = int(ln.split(b";")[0], 16)
        while len(rest) < n + 2:
            self.buf = rest; self._fill(); rest = self.buf
        self.body += rest[:n]; self.buf = rest[n + 2:]
        return n > 0
    def events(self):
        while True:
            while b"\n\n" in self.body:
                ev, self.body = self.body.split(b"\n\n", 1)
                yield time.monotonic_ns(), ev.decode()
            if not self._chunk(): return
    def all(self):
        while self._chunk(): pass
        return self.body

def stream(u, path, body, close_after=None, hold=None):
    r = Reader(post(u, path, body, hold=hold)); st = r.head()
    out = []
    if st != 200: return st, r.all().decode(), out
    for t, ev in r.events():
        assert ev.startswith("data: "), "bad SSE line: %r" % ev
        p = ev[6:]
        out.append((t, p))
        if close_after is not None and len(out) >= close_after:
            r.s.close(); return st, "", out
    return st, "", out

def check_stream(out, n_expect, chat=False, send_ns=False):
    """Every data line is JSON, [DONE] comes last, content chunks and usage
    agree with n_expect."""
    assert out and out[-1][1] == "[DONE]", "no [DONE] at the end"
    objs = [json.loads(p) for _, p in out[:-1]]
    content, usage, timings, first_role = 0, None, None, None
    for o in objs:
        assert o["object"] == ("chat.completion.chunk" if chat else "text_completion"), o
        assert isinstance(o["created"], int) and o["id"] and o["model"]
        if send_ns and o["choices"] and o["choices"][0]["finish_reason"] is None:
            assert isinstance(o["send_ns"], int) and o["send_ns"] > 0
        if not o["choices"]:
            usage = o["usage"]; continue
        c = o["choices"][0]
        if "timings" in o: timings = o["timings"]
        if c["finish_reason"] is None:
            content += 1
            if chat:
                if first_role is None: first_role = c["delta"].get("role")
                assert isinstance(c["delta"]["content"], str)
            else:
                assert isinstance(c["text"], str)
    assert content == n_expect, "content chunks %d != %d" % (content, n_expect)
    assert usage and usage["completion_tokens"] == n_expect, usage
    assert usage["total_tokens"] == usage["prompt_tokens"] + n_expect
    assert timings and timings["predicted_n"] == n_expect and "prompt_ms" in timings
    # llama-server's convention: n - 1 decode steps over predicted_ms
    if n_expect >= 2 and timings["predicted_ms"] > 0:
        want = (n_expect - 1) * 1000.0 / timings["predicted_ms"]
        assert abs(timings["predicted_per_second"] - want) <= 1e-6 * want, timings
        assert abs(timings["predicted_per_token_ms"] * (n_expect - 1) - timings["predicted_ms"]) \
            <= 1e-6 * timings["predicted_ms"], timings
    if chat: assert first_role == "assistant"
    return usage

def metrics(u):
    h, p = url_parts(u)
    s = socket.create_connection((h, p))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    r = Reader(s); r.head(); txt = r.all().decode(); s.close()
    m = {}
    for l in txt.splitlines():
        if l and not l.startswith("#"):
            k, v = l.rsplit(" ", 1); m[k.split("{")[0] + ("" if "quantile" not in k else k[k.index("{"):])] = float(v)
    return m

def wait_metric(u, name, pred, timeout=5.0):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = metrics(u).get(name)
        if v is not None and pred(v): return time.time() - t0
        time.sleep(0.02)
    raise AssertionError("%s did not reach the expected value (now %s)" % (name, metrics(u).get(name)))

def main():
    cmd, u = sys.argv[1], sys.argv[2]
    P = "/v1/completions"
    if cmd == "stream":
        st, _, out = stream(u, P, {"prompt": "The quick brown fox", "max_tokens": 12, "stream": True,
                                   "ignore_eos": True, "stream_options": {"include_usage": True}})
        assert st == 200
        usage = check_stream(out, 12)
        h, p = url_parts(u)
        r = Reader(post(u, "/tokenize", {"prompt": "The quick brown fox"})); assert r.head() == 200
        tk = json.loads(r.all())
        assert tk["count"] == len(tk["tokens"]) == usage["prompt_tokens"], (tk, usage)
    elif cmd == "plain":
        r = Reader(post(u, P, {"prompt": [1, 2, 3, 4, 5], "max_tokens": 7, "ignore_eos": True,
                               "temperature": 0})); assert r.head() == 200
        o = json.loads(r.all())
        assert o["object"] == "text_completion" and isinstance(o["choices"][0]["text"], str)
        assert o["usage"] == {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}, o
        assert o["choices"][0]["finish_reason"] == "length" and o["timings"]["predicted_n"] == 7
        # same seed, same text: the sampler is seeded per request
        a = []
        for _ in range(2):
            r = Reader(post(u, P, {"prompt": "seeded", "max_tokens": 6, "seed": 7, "ignore_eos": True}))
            assert r.head() == 200
            a.append(json.loads(r.all())["choices"][0]["text"])
        assert a[0] == a[1], a
    elif cmd == "chat":
        body = {"messages": [{"role": "system", "content": "be brief"},
                             {"role": "user", "content": [{"type": "text", "text": "hello"}]}],
                "max_completion_tokens": 9, "stream": True, "ignore_eos": True,
                "stream_options": {"include_usage": True}}
        st, _, out = stream(u, "/v1/chat/completions", body)
        assert st == 200
        check_stream(out, 9, chat=True)
        body["stream"] = False
        r = Reader(post(u, "/v1/chat/completions", body)); assert r.head() == 200
        o = json.loads(r.all())
        assert o["object"] == "chat.completion" and o["choices"][0]["message"]["role"] == "assistant"
        assert o["usage"]["completion_tokens"] == 9
    elif cmd == "concurrent":
        n, res = int(sys.argv[3]), []
        # a long stream runs first (15000 tokens: the server's context is
        # 16384); the others are sent once its first token is in, so each
        # joins decode steps it is still in, however fast or loaded the
        # machine: requests sent together may otherwise each finish before
        # the next is admitted
        ra = Reader(post(u, P, {"prompt": "long", "max_tokens": 15000, "stream": True,
                                "ignore_eos": True}))
        assert ra.head() == 200
        ea = ra.events(); next(ea)
        n -= 1
        # every request is complete only once all are connected and sent,
        # so however late a thread starts they arrive together
        hold = threading.Barrier(n)
        def one(i):
            st, _, out = stream(u, P, {"prompt": "request %d " % i * (i + 1), "max_tokens": 48,
                                       "stream": True, "ignore_eos": True,
                                       "stream_options": {"include_usage": True}}, hold=hold)
            check_stream(out, 48); res.append(i)
        th = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        [t.start() for t in th]; [t.join() for t in th]
        assert len(res) == n, "%d of %d finished" % (len(res), n)
        m = metrics(u)
        assert m["caliper:decode_batch_size_max"] >= 2, "no two sequences shared a step"
        assert m["vllm:num_requests_running"] == 1, "the long stream ended early"
        ra.s.close()   # hang up: its slot comes back
        wait_metric(u, "vllm:num_requests_running", lambda v: v == 0, timeout=600)
    elif cmd == "disconnect":
        # --max-batch 1 --max-queue 1: A runs, B waits, C is refused with 503
        body = {"prompt": "long", "max_tokens": 1000, "stream": True, "ignore_eos": True}
        ra = Reader(post(u, P, body)); assert ra.head() == 200
        ea = ra.events()
        ts = [next(ea)[0] for _ in range(5)]
        step = sorted((b - a) / 1e9 for a, b in zip(ts, ts[1:]))[1]   # a decode step, s
        rb = Reader(post(u, P, body)); assert rb.head() == 200
        wait_metric(u, "caliper:num_requests_waiting", lambda v: v == 1)
        rc = Reader(post(u, P, body)); st = rc.head(); err = json.loads(rc.all())
        assert st == 503 and rc.headers.get("retry-after") == "1", (st, rc.headers)
        assert err["error"]["code"] == "queue_full"
        ra.s.close()                        # hang up mid-stream
        t0 = time.time()
        eb = rb.events(); next(eb)          # B gets the slot
        dt = time.time() - t0
        # a few steps (A's last write fails, B's prefill, B's first token),
        # not A's remaining 1000 tokens; sanitizer builds are slower per step
        limit = max(1.0, 12 * step)
        assert dt < limit, "B waited %.2fs after A hung up (step %.3fs)" % (dt, step)
        assert metrics(u)["caliper:request_aborted_total"] >= 1
        rb.s.close()
        dt = wait_metric(u, "vllm:num_requests_running", lambda v: v == 0, max(2.0, 12 * step))
        print("slot freed %.0f ms after the hang-up" % (dt * 1000))
        # nothing runs: the KV cache is empty again (clients that hang up
        # leave no engine step behind them to update the gauge)
        wait_metric(u, "caliper:kv_cache_usage_perc", lambda v: v == 0, max(2.0, 12 * step))
        assert metrics(u)["vllm:kv_cache_usage_perc"] == 0
        g = metrics(u)["caliper:generation_tokens_total"]
        assert g < 1000, "generated %d tokens for clients that left" % g
    elif cmd == "errors":
        def err(path, body, status, param=None, method="POST"):
            h, p = url_parts(u)
            s = socket.create_connection((h, p))
            if method == "POST":
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                          % (path.encode(), len(data)) + data)
            else:
                s.sendall(b"%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % (method.encode(), path.encode()))
            r = Reader(s); st = r.head()
            try: b = r.all()
            except (ConnectionResetError, BrokenPipeError): b = b""
            assert st == status, "%s %s: %d != %d (%r)" % (method, path, st, status, b[:200])
            if b:
                e = json.loads(b)["error"]
                assert e["message"] and e["type"]
                if param is not None: assert e["param"] == param, (e, param)
            return r
        err(P, {"prompt": "x", "max_tokens": "ten"}, 400, "max_tokens")
        err(P, {"prompt": "x", "temperature": 9}, 400, "temperature")
        err(P, {"prompt": "x", "n": 2}, 400, "n")
        err(P, {"max_tokens": 3}, 400, "prompt")
        err(P, {"prompt": [1, -4]}, 400, "prompt")
        err(P, b"{not json", 400)
        err("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, 400,
            "messages[0].role")
        err(P, {"prompt": "x" * 100, "max_tokens": 500}, 400, "max_tokens")   # context 512
        err(P, {"prompt": "y" * 3000}, 400, "prompt")
        # a declared body over the limit is refused before it is sent
        h, p = url_parts(u)
        s = socket.create_connection((h, p))
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (P.encode(), 5 << 20))
        r = Reader(s); assert r.head() == 413; s.close()
        # a chunked body over the limit is drained and refused
        s = socket.create_connection((h, p))
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" % P.encode())
        blk = b"x" * 65536
        for _ in range(80): s.sendall(b"%x\r\n%s\r\n" % (len(blk), blk))
        s.sendall(b"0\r\n\r\n")
        r = Reader(s); assert r.head() == 413; s.close()
        err("/nope", None, 404, method="GET")
        r = err(P, None, 405, method="GET")
        assert "post" in r.headers.get("allow", "").lower()
        err("/metrics", {}, 405)
    elif cmd == "pace":
        N = int(sys.argv[3])
        st, _, out = stream(u, P, {"prompt": "p", "max_tokens": 10, "stream": True,
                                   "stream_options": {"include_usage": True}})
        assert st == 200
        check_stream(out, 10, send_ns=True)
        objs = [json.loads(p) for _, p in out[:-1] if json.loads(p)["choices"]
                and json.loads(p)["choices"][0]["finish_reason"] is None]
        sends = [o["send_ns"] for o in objs]
        gaps = [(b - a) / 1e6 for a, b in zip(sends, sends[1:])]
        # chunk k goes out at due_k + late_k with due_{k+1} - due_k = N, so
        # every gap lies within N ± the largest lateness the server measured
        # (its own clock, the same stamp as send_ns): a bound from the work,
        # not from how busy this machine is
        L = metrics(u)['caliper:pace_lateness_ms{quantile="1"}']
        assert len(gaps) >= 8 and all(N - L - 0.01 <= g <= N + L + 0.01 for g in gaps), (N, L, gaps)
        arr = [t for t, p in out[:10]]
        agaps = sorted((b - a) / 1e6 for a, b in zip(arr, arr[1:]))
        assert 0.5 * N <= agaps[len(agaps) // 2] <= 2 * N, agaps
        # many concurrent paced streams keep their schedule
        K, ok = int(sys.argv[4]), []
        def one():
            st, _, o = stream(u, P, {"prompt": "p", "max_tokens": 20, "stream": True})
            if st == 200 and o[-1][1] == "[DONE]" and len(o) == 22: ok.append(1)
        th = [threading.Thread(target=one) for _ in range(K)]
        [t.start() for t in th]; [t.join() for t in th]
        assert len(ok) == K, "%d of %d paced streams complete" % (len(ok), K)
        m = metrics(u)
        print("pace: %d streams, lateness p50 %.2f ms p99 %.2f ms max %.2f ms" % (
            K, m['caliper:pace_lateness_ms{quantile="0.5"}'],
            m['caliper:pace_lateness_ms{quantile="0.99"}'], m['caliper:pace_lateness_ms{quantile="1"}']))
    else:
        raise SystemExit("unknown " + cmd)

main()
EOF

py() { python3 "$PY" "$@"; }
# stop_serve PID NAME: SIGTERM, then the exit status must be 0 within 5 s
# (a sanitizer report or a crash on the way out fails it)
stop_serve() {
  kill -TERM "$1"
  local i
  for i in $(seq 1 2400); do kill -0 "$1" 2>/dev/null || break; sleep 0.05; done
  wait "$1"; local rc=$?
  check "$2: SIGTERM stops it cleanly (exit $rc)" test "$rc" -eq 0
}

# --help and usage errors
check "serve --help exits 0" "$CALIPER" serve --help >/dev/null
"$CALIPER" serve --max-batch 0 >/dev/null 2>"$E2E_TMP/err"; rc=$?
check "--max-batch 0 is a usage error naming the flag" \
  test "$rc" -eq 2 -a -n "$(grep -- '--max-batch' "$E2E_TMP/err")"
"$CALIPER" serve --preset huge >/dev/null 2>"$E2E_TMP/err"; rc=$?
check "--preset huge is a usage error" test "$rc" -eq 2
timeout 30 "$CALIPER" serve --host "" --port 0 >"$E2E_TMP/out" 2>"$E2E_TMP/err"; rc=$?
check "--host \"\" is a usage error naming the flag, and prints no URL" \
  test "$rc" -eq 2 -a -n "$(grep -F -- '--host: ""' "$E2E_TMP/err")" -a ! -s "$E2E_TMP/out"

# startup: tiny answers /health once it says it listens. The time is a
# figure, printed, not a check: a loaded machine stretches it, and only a
# hang should fail the test (start_serve waits up to 10 s for the line).
t0=$(date +%s%N)
start_serve --preset tiny --max-batch 8 --profile "$E2E_TMP/profile.json" || { not_ok "serve starts"; finish; }
check "tiny answers /health once listening" curl -sf --max-time 30 "$SERVE_URL/health" -o /dev/null
t1=$(date +%s%N)
echo "# startup to first answer: $(( (t1 - t0) / 1000000 )) ms (tiny; figure, not a bound)"
U=$SERVE_URL; PID1=$SERVE_PID

check "streamed completion: valid chunks, [DONE], usage = chunks = max_tokens" py stream "$U"
check "curl -N stream ends with [DONE]" \
  bash -c "curl -sN '$U/v1/completions' -d '{\"prompt\":\"hi\",\"max_tokens\":3,\"stream\":true}' | tail -2 | grep -q '^data: \[DONE\]'"
check "non-streamed completion with usage and timings; seeded output repeats" py plain "$U"
check "chat, streamed and not" py chat "$U"
check "error statuses: 400 naming the field, 413, 404, 405, context overflow" py errors "$U"
m=$(curl -s "$U/metrics")
check "/metrics has vllm:num_requests_running" grep -q '^vllm:num_requests_running' <<<"$m"
check "/metrics has a decode step histogram" grep -q '^caliper:decode_step_seconds_bucket' <<<"$m"
check "/metrics has kv cache usage" grep -q '^caliper:kv_cache_usage_perc' <<<"$m"
check "/v1/models names the model and its parameters" \
  python3 -c "import json,sys; d=json.load(sys.stdin)['data'][0]; assert d['id']=='caliper-tiny' and d['params']>0 and d['preset']=='tiny'" \
  < <(curl -s "$U/v1/models")
check "GET /profile is JSON" python3 -c "import json,sys; json.load(sys.stdin)" < <(curl -s "$U/profile")
# a stream in flight at shutdown ends with [DONE] rather than a cut connection
curl -sN "$U/v1/completions" -d '{"prompt":"x","max_tokens":400,"stream":true,"ignore_eos":true}' \
  >"$E2E_TMP/inflight" 2>/dev/null &
CURL=$!
# stop once the stream is open (its first bytes are in), not after a fixed
# sleep that a loaded machine can outlast before curl even connects
for i in $(seq 1 2400); do [ -s "$E2E_TMP/inflight" ] && break; sleep 0.05; done
stop_serve "$PID1" "tiny server"
wait "$CURL"
check "a stream open at shutdown still ends with [DONE]" grep -q '^data: \[DONE\]' "$E2E_TMP/inflight"
check "--profile wrote JSON at shutdown" python3 -c "import json; json.load(open('$E2E_TMP/profile.json'))"

# batching: a context long enough for a stream that outlasts the others
start_serve --preset tiny --max-batch 8 --context 16384 || { not_ok "long-context serve starts"; finish; }
check "5 concurrent streams joining a long one all finish, sharing decode steps" \
  py concurrent "$SERVE_URL" 6
stop_serve "$SERVE_PID" "long-context server"

# a slower model so a stream outlives the hang-up: the slot must come back
start_serve --preset small --max-batch 1 --max-queue 1 || { not_ok "small serve starts"; finish; }
check "queue full → 503 Retry-After; a hang-up frees the slot at once" py disconnect "$SERVE_URL"
stop_serve "$SERVE_PID" "small server"

# pacing mode: chunks carry send_ns and come N ms apart, many streams at once
start_serve --pace-ms 20 || { not_ok "pace serve starts"; finish; }
check "pace mode: send_ns on each chunk, ~20 ms apart, 200 concurrent streams complete" \
  py pace "$SERVE_URL" 20 200
stop_serve "$SERVE_PID" "pacing server"
finish
