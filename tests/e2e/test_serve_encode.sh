# caliper serve keeps answering while long bodies are tokenized: /tokenize,
# completions and chat bodies are parsed and encoded by worker threads, off
# the HTTP event loop. Six 4.1 MB /tokenize bodies of "x<s>y</s>" (special
# tokens every 4 bytes; split in quadratic time, one of them held the event
# loop, and so /health, for minutes) keep the workers busy; once /metrics
# shows one being tokenized, /health must answer (within 2 s, a bound for a
# hung loop only) while at least one of them is provably still unanswered.
# Every body still gets its answer (413: more than 2^20 ids).
source "$(dirname "$0")/lib.sh"
need python3 "the encode-off-the-loop check" || finish
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$E2E_TMP"

start_serve --preset tiny --vocab "$ROOT/tests/data/vocab/llama-spm.gguf" --max-batch 2 \
  || { not_ok "serve --vocab llama-spm"; finish; }
python3 - "$SERVE_URL" >enc.out 2>&1 <<'PY'
import json, sys, threading, time, urllib.request, urllib.error
url = sys.argv[1]
body = json.dumps({"content": "x<s>y</s>" * 460000}).encode()   # 4.14 MB
done, codes = [], []
def post():
    r = urllib.request.Request(url + "/tokenize", body, {"Content-Type": "application/json"})
    try:
        code = urllib.request.urlopen(r, timeout=600).status
    except urllib.error.HTTPError as e:
        code = e.code
    codes.append(code)
    done.append(time.monotonic())
# the bound of each call below is for a hung server only (the event loop
# held by an encode answers nothing)
def tokenizing():
    for line in urllib.request.urlopen(url + "/metrics", timeout=120).read().decode().splitlines():
        if line.startswith("caliper:requests_tokenizing{"):
            return int(line.split()[-1])
    return None
threads = [threading.Thread(target=post, daemon=True) for _ in range(6)]
for t in threads:
    t.start()
# readiness: a body is in the workers' hands (polls end as soon as it is;
# the bound is for a hung server)
deadline = time.monotonic() + 120
while time.monotonic() < deadline and not tokenizing():
    time.sleep(0.01)
n = tokenizing()
print("tokenizing", n)
t0 = time.monotonic()
h = urllib.request.urlopen(url + "/health", timeout=120)
status = json.load(h)["status"]
t1 = time.monotonic()
pending = 6 - len([d for d in done if d <= t1])
print(f"health {status} in {1000 * (t1 - t0):.1f} ms, {pending} of 6 bodies still unanswered")
for t in threads:
    t.join()
print("answers", sorted(codes))
ok = n and status == "ok" and t1 - t0 < 2 and pending >= 1 and \
     sorted(codes) == [413] * 6
print("ok" if ok else "FAIL")
PY
check "/health answers while 4.1 MB special-token /tokenize bodies are being encoded ($(grep '^health' enc.out))" \
  grep -qx ok enc.out
grep -qx ok enc.out || cat enc.out
check "serve is still running" kill -0 "$SERVE_PID"
kill "$SERVE_PID" 2>/dev/null
for i in $(seq 1 600); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.05; done
check "serve stops on SIGTERM" sh -c "! kill -0 $SERVE_PID 2>/dev/null"
kill -9 "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null
finish
