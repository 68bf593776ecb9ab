#!/usr/bin/env python3
"""Send the same /tokenize bodies to llama-server and caliper serve and
compare: the same ids for every body both accept, and a refusal from both
for every body one refuses (llama-server answers a body that is not UTF-8
with 500, caliper with 400: both are refusals). Prints mismatches and "N/M agree".
  tokenizer_agree.py STRINGS.jsonl LLAMA_URL CALIPER_URL"""
import http.client, json, sys, urllib.parse


def conn(url):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=60)


def post(c, body):
    c.request("POST", "/tokenize", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        return ("refused",)
    return ("ok", json.loads(data)["tokens"])


lines = [json.loads(x) for x in open(sys.argv[1])]
a, b = conn(sys.argv[2]), conn(sys.argv[3])
agree, shown, kinds = 0, 0, {}
for o in lines:
    body = o["body"].encode("latin-1")
    ra, rb = post(a, body), post(b, body)
    same = ra == rb
    agree += same
    k = kinds.setdefault(o["kind"], [0, 0])
    k[0] += same
    k[1] += 1
    if not same and shown < 15:
        shown += 1
        print(f"MISMATCH {o['kind']}: {o['body'][:160]!r}\n  llama:   {ra}\n  caliper: {rb}")
print(" ".join(f"{k}:{v[0]}/{v[1]}" for k, v in sorted(kinds.items())))
print(f"{agree}/{len(lines)} agree")
sys.exit(0 if agree == len(lines) else 1)
