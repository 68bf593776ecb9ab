#!/usr/bin/env python3
"""make compat: the next-token distribution of caliper's engine and of
llama-server on the same GGUF file must agree.

Reads next_token's JSON lines (caliper: prompt, its token ids, top-5 ids with
probabilities), asks llama-server for the same prompts (/tokenize, then
/completion with n_probs, which reports the softmax of the raw logits over
the whole vocabulary), and checks for every prompt:
  - llama-server tokenizes the prompt to exactly caliper's ids;
  - the top-5 ids agree, except where two neighbours are within the
    tolerance of each other (a near tie may swap ranks);
  - each id's probability differs by at most the tolerance.
Prints one line per prompt and the largest difference; exits 1 on any
disagreement."""
import json, math, sys, urllib.request

def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)

def main():
    url, cal_file, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
    K = 5
    rows = [json.loads(l) for l in open(cal_file, encoding="utf-8") if l.strip()]
    bad, worst, n = 0, 0.0, 0
    for row in rows:
        n += 1
        text = row["prompt"]
        toks = post(url + "/tokenize", {"content": text, "add_special": False})["tokens"]
        if toks != row["ids"]:
            print(f"not ok - prompt {n}: llama-server tokenizes to {toks[:12]}..., caliper to {row['ids'][:12]}...")
            bad += 1
            continue
        # the probabilities are the raw logits' softmax; the bias only keeps
        # the sampled token off bytes 128..255, whose incomplete UTF-8 would
        # make the server hold the token (and its probabilities) back
        r = post(url + "/completion", {"prompt": text, "n_predict": 1, "n_probs": K,
                                       "temperature": 0, "cache_prompt": False,
                                       "logit_bias": [[i, False] for i in range(128, 256)]})
        cp = r["completion_probabilities"][0]
        ll = [(t["id"], math.exp(t["logprob"])) for t in cp["top_logprobs"]][:K]
        cal = [(t["id"], t["p"]) for t in row["top"]][:K]
        pc, pl = dict(cal), dict(ll)
        why = []
        for i in range(K):
            (ic, p_c), (il, p_l) = cal[i], ll[i]
            worst_i = abs(p_c - p_l)
            if ic != il:
                # a swap is a near tie: each id's probability in the other
                # list, when listed, is within tol of the rank's value
                if abs(p_c - p_l) > tol or (il in pc and abs(pc[il] - p_l) > tol) \
                        or (ic in pl and abs(pl[ic] - p_c) > tol):
                    why.append(f"rank {i + 1}: id {ic} (p {p_c:.6f}) vs {il} (p {p_l:.6f})")
            for tid in (ic, il):
                if tid in pc and tid in pl:
                    worst_i = max(worst_i, abs(pc[tid] - pl[tid]))
            worst = max(worst, worst_i)
            if worst_i > tol:
                why.append(f"rank {i + 1}: |dp| {worst_i:.2e} > {tol:g}")
        if why:
            bad += 1
            print(f"not ok - prompt {n} ({len(row['ids'])} tokens): " + "; ".join(why))
        else:
            d = max(abs(pc[i] - pl[i]) for i in pc if i in pl)
            print(f"ok - prompt {n} ({len(row['ids'])} tokens): top-{K} ids agree, "
                  f"max |dp| {d:.2e}, top-1 id {cal[0][0]} p {cal[0][1]:.4f}")
    print(f"# {n} prompts, largest |dp| {worst:.3e}, tolerance {tol:g}")
    return 1 if bad or n < 20 else 0

if __name__ == "__main__":
    sys.exit(main())
