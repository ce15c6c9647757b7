#!/usr/bin/env python3
"""Records and compares greedy goldens in the ../shared/golden format.

A golden file is {"model", "reference", "cases": [...]}; each case holds the
prompt text, `prompt_ids` (with the BOS the server adds), the greedy
`gen_ids` and `text`, and `steps[]`: the chosen `id` and `token` and the
top-5 `{id, logprob}` of the full distribution (log-softmax of the logits,
llama-server's pre-sampling n_probs) at each generated token.

record: re-records every case of an existing golden file (its prompts and
  lengths) from a running llama-server and writes the new file in the same
  layout (json indent 1, ASCII escapes, no trailing newline):

    record_golden.py record PORT EXISTING.json [-o OUT.json]

  Each case is POST /completion {prompt, temperature 0, n_predict =
  len(gen_ids), n_probs 5, post_sampling_probs false, cache_prompt false,
  return_tokens true}; prompt_ids come from POST /tokenize with
  add_special true (the tokens the server evaluates, BOS included).

compare: for each pair of files, per case, the number of leading equal
  gen_ids and the largest |logprob difference| over the top-5 entries (matched
  by id) of the steps whose chosen ids agree; where the ids part, also the
  difference at that step and both files' top-1/top-2 gap there. Exit
  status 1 when any file differs by more than --tol (default 1e-4) or in any
  gen_id.

    record_golden.py compare A.json B.json [A2.json B2.json ...] [--tol T]
    record_golden.py compare --dirs DIR_A DIR_B REL.json [REL2.json ...]

Standard library only.
"""
import argparse
import json
import os
import sys
import urllib.error
import urllib.request

N_PROBS = 5


def post(port, path, body):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as e:
        sys.exit(f"{path} {body}: {e.code} {e.read().decode()}")


def record_case(port, old):
    prompt = old["prompt"]
    n_predict = len(old["gen_ids"])
    result = post(port, "/completion", {
        "prompt": prompt,
        "temperature": 0.0,
        "n_predict": n_predict,
        "n_probs": N_PROBS,
        "post_sampling_probs": False,
        "cache_prompt": False,
        "return_tokens": True,
    })
    prompt_ids = post(port, "/tokenize",
                      {"content": prompt, "add_special": True})["tokens"]
    if result.get("tokens_evaluated") != len(prompt_ids):
        sys.exit(f"{prompt!r}: server evaluated "
                 f"{result.get('tokens_evaluated')} prompt tokens, /tokenize "
                 f"gave {len(prompt_ids)}")
    steps = [{"id": p["id"], "token": p["token"],
              "top": [{"id": t["id"], "logprob": t["logprob"]}
                      for t in p["top_logprobs"]]}
             for p in result["completion_probabilities"]]
    if [s["id"] for s in steps] != result["tokens"]:
        sys.exit(f"{prompt!r}: completion_probabilities ids differ from tokens")
    return {"prompt": prompt, "prompt_ids": prompt_ids,
            "gen_ids": result["tokens"], "text": result["content"],
            "steps": steps}


def cmd_record(args):
    with open(args.existing) as f:
        old = json.load(f)
    new = {"model": old["model"], "reference": old["reference"],
           "cases": [record_case(args.port, c) for c in old["cases"]]}
    text = json.dumps(new, indent=1, ensure_ascii=True)
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)),
                    exist_ok=True)
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def top_diff(step_a, step_b):
    """Largest |logprob difference| over top entries present in both, and
    the number of ids in one top list but not the other."""
    a = {t["id"]: t["logprob"] for t in step_a["top"]}
    b = {t["id"]: t["logprob"] for t in step_b["top"]}
    common = a.keys() & b.keys()
    diff = max((abs(a[i] - b[i]) for i in common), default=0.0)
    return diff, len(a.keys() ^ b.keys())


def gap(step):
    lp = sorted((t["logprob"] for t in step["top"]), reverse=True)
    return lp[0] - lp[1] if len(lp) > 1 else float("inf")


def compare_case(ca, cb):
    """Returns a dict of the case's figures."""
    ga, gb = ca["gen_ids"], cb["gen_ids"]
    n = min(len(ga), len(gb))
    eq = 0
    while eq < n and ga[eq] == gb[eq]:
        eq += 1
    max_diff, unmatched = 0.0, 0
    for i in range(eq):
        d, u = top_diff(ca["steps"][i], cb["steps"][i])
        max_diff = max(max_diff, d)
        unmatched += u
    out = {"equal": eq, "len": max(len(ga), len(gb)), "max_diff": max_diff,
           "unmatched": unmatched,
           "prompt_ids_equal": ca["prompt_ids"] == cb["prompt_ids"]}
    if eq < n:
        d, _ = top_diff(ca["steps"][eq], cb["steps"][eq])
        out["split"] = {"step": eq, "diff": d, "gap_a": gap(ca["steps"][eq]),
                        "gap_b": gap(cb["steps"][eq])}
    return out


def compare_files(name, path_a, path_b, tol):
    with open(path_a) as f:
        a = json.load(f)
    with open(path_b) as f:
        b = json.load(f)
    if [c["prompt"] for c in a["cases"]] != [c["prompt"] for c in b["cases"]]:
        print(f"{name}: different case lists")
        return False
    same = True
    rows = []
    for k, (ca, cb) in enumerate(zip(a["cases"], b["cases"])):
        r = compare_case(ca, cb)
        ok = (r["equal"] == r["len"] and r["max_diff"] <= tol
              and r["prompt_ids_equal"])
        same = same and ok
        line = (f"  case {k}: equal ids {r['equal']}/{r['len']}, "
                f"max |dlogprob| {r['max_diff']:.3g}")
        if r["unmatched"]:
            line += f", {r['unmatched']} top-5 ids unmatched"
        if not r["prompt_ids_equal"]:
            line += ", prompt_ids differ"
        if "split" in r:
            s = r["split"]
            line += (f"; step {s['step']}: |dlogprob| {s['diff']:.3g}, "
                     f"top1-top2 gap {s['gap_a']:.3g} / {s['gap_b']:.3g}")
        rows.append((r, line))
    eq = min(r["equal"] for r, _ in rows)
    n = max(r["len"] for r, _ in rows)
    md = max(r["max_diff"] for r, _ in rows)
    identical = open(path_a, "rb").read() == open(path_b, "rb").read()
    print(f"{name}: {'SAME' if same else 'DIFFERS'} "
          f"(min equal ids {eq}/{n}, max |dlogprob| {md:.3g}"
          f"{', byte-identical' if identical else ''})")
    for _, line in rows:
        print(line)
    return same


def cmd_compare(args):
    if args.dirs:
        dir_a, dir_b = args.dirs
        pairs = [(rel, os.path.join(dir_a, rel), os.path.join(dir_b, rel))
                 for rel in args.files]
    else:
        if len(args.files) % 2:
            sys.exit("compare: give files in pairs (A B ...)")
        pairs = [(f"{a} vs {b}", a, b)
                 for a, b in zip(args.files[::2], args.files[1::2])]
    all_same = True
    for name, a, b in pairs:
        all_same = compare_files(name, a, b, args.tol) and all_same
    return 0 if all_same else 1


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="re-record a golden file")
    r.add_argument("port", type=int, help="llama-server port on 127.0.0.1")
    r.add_argument("existing", help="golden file whose cases to record")
    r.add_argument("-o", "--output", help="output file (default stdout)")
    c = sub.add_parser("compare", help="compare golden files")
    c.add_argument("files", nargs="+")
    c.add_argument("--dirs", nargs=2, metavar=("DIR_A", "DIR_B"),
                   help="compare DIR_A/REL with DIR_B/REL for each REL")
    c.add_argument("--tol", type=float, default=1e-4,
                   help="largest logprob difference counted as the same")
    args = p.parse_args()
    if args.cmd == "record":
        cmd_record(args)
        return 0
    return cmd_compare(args)


if __name__ == "__main__":
    sys.exit(main())
