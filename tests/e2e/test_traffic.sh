#!/usr/bin/env bash
# Traffic workloads against the built-in engine (docs/workload.md): a
# dataset file written here (its name and SHA-256 in the protocol; compare
# refuses runs on different datasets), drawn lengths, the chat scenario
# (prefix shares checked against the token counts), and a session captured
# through caliper proxy and replayed with --ab against a second engine.
. "$(dirname "$0")/lib.sh"
DB="$E2E_TMP/t.db"
RUN=("$CALIPER" run --preset tiny --shots 1 --no-telemetry --db "$DB")

# ---- a dataset the test writes --------------------------------------------
printf 'Write a short poem about rivers.\nExplain slow start in TCP.\nName three primes.\n' >"$E2E_TMP/a.txt"
printf '{"prompt":"Tell me about the moon."}\n"Why is the sky blue?"\n{"text":"Count to five."}\n' >"$E2E_TMP/b.jsonl"
"${RUN[@]}" --dataset "$E2E_TMP/a.txt" --requests 6 --max-tokens 4 --seed 7 --label ds-a >"$E2E_TMP/ds1.out" 2>&1
check "dataset run (text) succeeds" [ $? -eq 0 ]
"${RUN[@]}" --dataset "$E2E_TMP/b.jsonl" --requests 6 --max-tokens 4 --seed 7 --label ds-b >"$E2E_TMP/ds2.out" 2>&1
check "dataset run (jsonl) succeeds" [ $? -eq 0 ]
sum=$(sha256sum "$E2E_TMP/a.txt" | cut -c1-64)
proto=$(sqlite3 "$DB" "select protocol from runs where label='ds-a'")
check "protocol names the dataset" python3 -c "
import json,sys; p=json.loads(sys.argv[1]); d=p['dataset']
assert d['name']=='a.txt' and d['format']=='text' and d['entries']==3, d
assert d['sha256']==sys.argv[2], (d['sha256'], sys.argv[2])" "$proto" "$sum"
# every prompt sent is one of the file's lines (after the nonce line)
check "prompts come from the dataset" python3 -c "
import sqlite3,sys
db=sqlite3.connect(sys.argv[1])
n=db.execute(\"select count(*) from requests r join cells c on r.cell_id=c.id join runs u on c.run_id=u.id where u.label='ds-a' and r.status='ok'\").fetchone()[0]
assert n==6, n" "$DB"
"$CALIPER" compare ds-a ds-b --db "$DB" >"$E2E_TMP/cmp.out" 2>&1
rc=$?
check "compare refuses runs on different datasets (exit 1)" [ $rc -eq 1 ]
check "compare names the dataset field" grep -q "content dataset:a.txt@${sum:0:12} vs dataset:b.jsonl@" "$E2E_TMP/cmp.out"
# the same dataset and seed: the same draws
"${RUN[@]}" --dataset "$E2E_TMP/a.txt" --requests 6 --max-tokens 4 --seed 7 --label ds-a2 >/dev/null 2>&1
check "same seed, same prompt lengths" [ "$(sqlite3 "$DB" "select group_concat(r.prompt_tokens) from requests r join cells c on r.cell_id=c.id join runs u on c.run_id=u.id where u.label='ds-a' order by r.idx")" = \
  "$(sqlite3 "$DB" "select group_concat(r.prompt_tokens) from requests r join cells c on r.cell_id=c.id join runs u on c.run_id=u.id where u.label='ds-a2' order by r.idx")" ]
"${RUN[@]}" --dataset "$E2E_TMP/missing.txt" >/dev/null 2>&1
check "a missing dataset is a usage error (exit 2)" [ $? -eq 2 ]

# ---- drawn lengths ----------------------------------------------------------
"${RUN[@]}" --prompt-tokens uniform:20-60 --max-tokens uniform:2-6 --requests 12 --seed 5 --label dist >"$E2E_TMP/dist.out" 2>&1
check "distribution run succeeds" [ $? -eq 0 ]
check "realised lengths within the asked ranges, and spread" python3 -c "
import sqlite3,sys
db=sqlite3.connect(sys.argv[1])
rows=db.execute(\"select r.prompt_tokens,r.output_tokens from requests r join cells c on r.cell_id=c.id join runs u on c.run_id=u.id where u.label='dist'\").fetchall()
assert len(rows)==12, rows
assert all(18<=p<=62 for p,o in rows), rows
assert all(2<=o<=6 for p,o in rows), rows
assert len({p for p,o in rows})>=4, rows" "$DB"
check "realised distribution shown" grep -q "prompt tokens, realised (server's count), asked uniform:20-60: min" "$E2E_TMP/dist.out"
"${RUN[@]}" --prompt-tokens uniform:9-3 >/dev/null 2>"$E2E_TMP/bad.err"
check "a reversed range is a usage error naming the value" grep -q 'uniform:9-3' "$E2E_TMP/bad.err"

# ---- the chat scenario: 4 users x 6 turns ------------------------------------
"${RUN[@]}" --serve-args "--context 2048" --scenario chat --users 4 --turns 6 --system-tokens 400 --user-tokens 160 \
  --max-tokens 6 --think-time 0 --stagger 20ms --seed 11 --label chat >"$E2E_TMP/chat.out" 2>&1
check "chat scenario succeeds" [ $? -eq 0 ]
sed -n '/^per turn/,$p' "$E2E_TMP/chat.out"
check "per-turn table has 6 turns" [ "$(sed -n '/^per turn/,/^TTFT /p' "$E2E_TMP/chat.out" | grep -cE '^ +[1-6] ')" -eq 6 ]
check "prefix shares agree with the token counts" python3 -c "
import json,sqlite3,sys
db=sqlite3.connect(sys.argv[1])
p=json.loads(db.execute(\"select protocol from runs where label='chat'\").fetchone()[0])['scenario']
plan=p['turn_plan']; assert p['users']==4 and len(plan)==6, p
sys_t=p['system_tokens']; assert abs(sys_t-400)<=3, sys_t
for k,t in enumerate(plan):
    for u in range(4):
        pt,sh=t['prompt_tokens'][u],t['shared_tokens'][u]
        if k==0: assert sh==(0 if u==0 else sys_t), (k,u,sh)
        else:
            prev=plan[k-1]['prompt_tokens'][u]
            assert sh==prev, (k,u,sh,prev)
            # the new part is the previous answer (6) and a message (48)
            assert abs(pt-prev-166)<=3, (k,u,pt,prev)
# the server counted every prompt as the plan did
cells=db.execute(\"select c.id from cells c join runs u on c.run_id=u.id where u.label='chat' order by c.seq\").fetchall()
assert len(cells)==6
for k,(cid,) in enumerate(cells):
    got=sorted(r[0] for r in db.execute('select prompt_tokens from requests where cell_id=?',(cid,)))
    assert got==sorted(plan[k]['prompt_tokens']), (k,got,plan[k]['prompt_tokens'])
share=[sum(t['shared_tokens'])/sum(t['prompt_tokens']) for t in plan]
assert all(b>a for a,b in zip(share[1:],share[2:])), share" "$DB"
# the growth is printed where its CI shows it (a figure, not asserted: on a
# shared machine the other users' prefill and the load move a few hundred
# ms either way), on the whole prompt (the built-in engine has no prefix
# cache), and never as a negative slope
check "TTFT against the prefix is fitted" \
  grep -qE '^TTFT (grows [0-9]+\.[0-9] ms per 1000 prompt tokens|against prompt tokens: no per-token cost shown) \(?.*the built-in engine has no prefix cache' "$E2E_TMP/chat.out"
check "... never a negative slope as a finding" bash -c "! grep -q '^TTFT grows -' '$E2E_TMP/chat.out'"
check "the run says whether the server reported prefix-cache hits" grep -q 'prefix cache: the built-in engine reported no cached tokens .* in 24 turns' "$E2E_TMP/chat.out"
check "that note is stored with the run" sh -c "sqlite3 '$DB' \"select verdicts from runs where label='chat'\" | grep -q 'prefix cache: the built-in engine'"
check "every turn has its 4 users' TTFT" [ "$(sed -n '/^per turn/,/^TTFT /p' "$E2E_TMP/chat.out" | grep -cE '^ +[1-6] .* 4$')" -eq 6 ]

"$CALIPER" report chat --db "$DB" -o "$E2E_TMP/chat.html" >/dev/null 2>&1
check "report has the per-turn chart and its 6 rows" python3 -c "
import re,sys; h=open(sys.argv[1]).read()
f=h[h.index('id=\"chart-turns\"'):]; f=f[:f.index('</figure>')]
assert '<svg' in f and f.count('<tr><td>')==6, f[:300]" "$E2E_TMP/chat.html"

# ---- a session captured through caliper proxy, replayed against engine B ----
start_serve --preset tiny --context 2048 || { not_ok "serve A started"; finish; }
A_URL=$SERVE_URL
log="$E2E_TMP/session.jsonl"
"$CALIPER" proxy --listen 127.0.0.1:0 --upstream "$A_URL" --log "$log" --tokenize \
  >/dev/null 2>"$E2E_TMP/proxy.err" &
E2E_PIDS+=($!)
PURL=
for i in $(seq 1 2400); do
  PURL=$(grep -oE 'http://127\.0\.0\.1:[0-9]+' "$E2E_TMP/proxy.err" | head -1)
  [ -n "$PURL" ] && break; sleep 0.05
done
check "proxy listening" [ -n "$PURL" ]
python3 - "$PURL" <<'PY' || not_ok "three turns through the proxy"
import json,sys,urllib.request
url=sys.argv[1]+"/v1/chat/completions"
msgs=[{"role":"system","content":"You are a careful assistant. "*30}]
for q in ["Name a river.","And a longer one?","Which is the deepest?"]:
    msgs.append({"role":"user","content":q+" Please explain in detail."*3})
    body=json.dumps({"messages":msgs,"max_tokens":6,"stream":True}).encode()
    r=urllib.request.urlopen(urllib.request.Request(url,body,{"Content-Type":"application/json"}),timeout=60)
    text=""
    for line in r:
        line=line.decode().strip()
        if line.startswith("data: {"):
            d=json.loads(line[6:])
            for c in d.get("choices",[]): text+=(c.get("delta") or {}).get("content") or ""
    msgs.append({"role":"assistant","content":text or "ok"})
PY
for i in $(seq 1 2400); do [ "$(wc -l <"$log" 2>/dev/null)" -ge 3 ] && break; sleep 0.05; done
check "the proxy logged three turns" [ "$(wc -l <"$log")" -eq 3 ]
start_serve --preset tiny --context 2048 --model-name caliper-b || { not_ok "serve B started"; finish; }
B_URL=$SERVE_URL
"$CALIPER" run --url "$A_URL" --url "$B_URL" --ab --shots 2 --replay "$log" --replay-speed 10 \
  --no-telemetry --db "$DB" --label replay >"$E2E_TMP/replay.out" 2>&1
check "replay --ab succeeds" [ $? -eq 0 ]
sed -n '/^per turn/,$p' "$E2E_TMP/replay.out"
check "per-turn comparison of A and B" [ "$(sed -n '/^per turn/,$p' "$E2E_TMP/replay.out" | grep -cE '^ +[1-3] ')" -eq 3 ]
check "whole-turn speedup with a CI over the shots, saying what noise it covers" \
  grep -qE "^whole-turn speedup A ÷ B: [0-9.]+× \[[0-9.]+, [0-9.]+\] 95% CI over 2 shots \(6 \(shot, turn\) pairs; t on each shot's mean log ratio; this run's noise only" "$E2E_TMP/replay.out"
check "replayed prompts keep the recorded sizes" python3 -c "
import json,sqlite3,sys
db=sqlite3.connect(sys.argv[1])
p=json.loads(db.execute(\"select protocol from runs where label='replay'\").fetchone()[0])['scenario']
assert p['sessions']==1 and p['turns']==3, p
rec=[json.loads(l) for l in open(sys.argv[2])]
for k,t in enumerate(p['turn_plan']):
    want=rec[k]['prefix_tokens']; got=t['prompt_tokens'][0]
    assert abs(got-want)<=3, (k,got,want)
    if k: assert t['shared_tokens'][0]==p['turn_plan'][k-1]['prompt_tokens'][0]" "$DB" "$log"

# a replay slowed so far that a think time passes a day is refused, naming
# the speed: it once sent every turn at once under the speed's label. The
# last turn comes 2 s after the one before ends; at 1e-5 that is 2e5 s.
python3 - "$log" "$E2E_TMP/slow.jsonl" <<'PY'
import json,sys
rec=[json.loads(l) for l in open(sys.argv[1])]
rec[2]['wall_ns']=rec[1]['wall_ns']+int((rec[1].get('turn_s') or 0)*1e9)+2_000_000_000
open(sys.argv[2],'w').write(''.join(json.dumps(r)+'\n' for r in rec))
PY
"$CALIPER" run --url "$A_URL" --shots 1 --replay "$E2E_TMP/slow.jsonl" --replay-speed 1e-5 \
  --no-telemetry --db "$DB" --label slow >"$E2E_TMP/slow.out" 2>&1
rc=$?
check "replay: a think time over a day is refused (exit $rc)" [ "$rc" -ne 0 ]
check "replay: the refusal names the speed and the wait" \
  grep -q "replay_speed: 1e-05 makes turn 3 of session 1 wait" "$E2E_TMP/slow.out"
check "replay: nothing was sent for the refused turns" \
  [ "$(sqlite3 "$DB" "select count(*) from cells c join runs r on c.run_id=r.id where r.label='slow'")" = 0 ]
"$CALIPER" run --shard 1/99999999999 --json "$E2E_TMP/x.json" >"$E2E_TMP/shard.out" 2>&1
rc=$?
check "--shard past int's range: a usage error naming the value as given (exit $rc)" \
  bash -c "[ $rc = 2 ] && grep -q '\"1/99999999999\"' '$E2E_TMP/shard.out'"
finish
