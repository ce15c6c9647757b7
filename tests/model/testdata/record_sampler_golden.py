#!/usr/bin/env python3
"""Records sampler_golden.json: seeded completions from llama.cpp's
llama-server (b10573) on ../shared/models/kquant/st260K-x4.q8_0.gguf, one
per sampler configuration, with the parameters the server resolved
(generation_settings) and the generated token ids, plus n_probs outputs for
some cases. sampler_golden_test.cc replays them through kvault's forward
pass and Sampler.

Start the server first (one slot, 256-token context), then run this:
  LD_LIBRARY_PATH=/tmp/llamalib ../shared/tools/llama.cpp/bin/llama-server \
      -m ../shared/models/kquant/st260K-x4.q8_0.gguf --port 18951 -np 1 -c 256
  python3 tests/model/testdata/record_sampler_golden.py 18951 \
      > tests/model/testdata/sampler_golden.json
"""
import json
import re
import sys
import urllib.error
import urllib.request

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 18951
N_PREDICT = 48

# (name, prompt, request fields beyond prompt/n_predict/return_tokens)
CASES = [
    ("default_t08", "Once upon a time", {"seed": 42, "temperature": 0.8}),
    ("default_t10", "Lily went to the park", {"seed": 7, "temperature": 1.0}),
    ("default_random_stream_long", "The cat",
     {"seed": 123456789, "temperature": 1.0, "n_predict": 120}),
    ("greedy_t0", "Once upon a time", {"seed": 5, "temperature": 0.0}),
    ("top_k_only", "Tom had a big", {"seed": 11, "temperature": 1.0,
     "samplers": ["top_k", "temperature"], "top_k": 5}),
    ("top_p_unsorted", "One day", {"seed": 12, "temperature": 1.0,
     "samplers": ["top_p", "temperature"], "top_p": 0.9}),
    ("min_p_only_chars", "The sun", {"seed": 13, "temperature": 1.2,
     "samplers": "mt", "min_p": 0.1}),
    ("typical", "Once upon a time", {"seed": 14, "temperature": 1.0,
     "typical_p": 0.7, "top_k": 0}),
    ("top_n_sigma", "Ben and Mia", {"seed": 15, "temperature": 1.0,
     "top_n_sigma": 1.5, "top_k": 0, "top_p": 1.0, "min_p": 0.0}),
    ("dynatemp", "The little dog", {"seed": 16, "temperature": 1.0,
     "dynatemp_range": 0.6, "dynatemp_exponent": 1.5}),
    ("xtc", "Once upon a time", {"seed": 17, "temperature": 1.0,
     "xtc_probability": 0.6, "xtc_threshold": 0.05, "top_k": 0}),
    ("penalties", "The bird saw the bird and the bird", {"seed": 18,
     "temperature": 1.0, "repeat_penalty": 1.3, "frequency_penalty": 0.4,
     "presence_penalty": 0.3, "repeat_last_n": 32}),
    ("penalties_whole_context", "Once upon a time", {"seed": 19,
     "temperature": 0.9, "repeat_penalty": 1.2, "repeat_last_n": 256}),
    ("dry", "Tim said, \"I like the ball. I like the ball. I like the",
     {"seed": 20, "temperature": 1.0, "dry_multiplier": 0.8,
      "dry_base": 1.75, "dry_allowed_length": 2, "dry_penalty_last_n": 256}),
    ("dry_breakers", "She said: \"Yes, yes, yes, yes, yes,",
     {"seed": 21, "temperature": 1.0, "dry_multiplier": 1.5,
      "dry_base": 2.0, "dry_allowed_length": 1, "dry_penalty_last_n": 40,
      "dry_sequence_breakers": [",", " yes", "said:"]}),
    ("mirostat1", "Once upon a time", {"seed": 22, "temperature": 1.0,
     "mirostat": 1, "mirostat_tau": 4.0, "mirostat_eta": 0.2}),
    ("mirostat2", "Once upon a time", {"seed": 23, "temperature": 0.9,
     "mirostat": 2, "mirostat_tau": 5.0, "mirostat_eta": 0.1}),
    ("logit_bias_ignore_eos", "Once upon a time", {"seed": 24,
     "temperature": 1.0, "ignore_eos": True,
     "logit_bias": [[432, -3.0], [" there", 1.5], [261, False]]}),
    ("adaptive_p", "The girl", {"seed": 25, "temperature": 1.0,
     "samplers": ["top_k", "min_p", "temperature", "adaptive_p"],
     "adaptive_target": 0.3, "adaptive_decay": 0.8}),
    ("min_keep", "The boy", {"seed": 26, "temperature": 1.0,
     "top_p": 0.3, "min_p": 0.5, "min_keep": 4}),
    ("all_filters", "Lucy and her mom", {"seed": 27, "temperature": 1.1,
     "samplers": "ekdtypsmx", "top_k": 30, "typical_p": 0.95,
     "top_p": 0.9, "min_p": 0.02, "xtc_probability": 0.3,
     "xtc_threshold": 0.2, "top_n_sigma": 2.0, "dry_multiplier": 0.5,
     "repeat_penalty": 1.1}),
    ("infill", "Once upon a time", {"seed": 28, "temperature": 1.0,
     "samplers": ["top_k", "infill", "temperature"], "top_k": 20}),
    ("probs_pre", "Once upon a time", {"seed": 29, "temperature": 1.0,
     "n_probs": 4, "n_predict": 12}),
    ("probs_post", "Once upon a time", {"seed": 30, "temperature": 1.0,
     "n_probs": 4, "post_sampling_probs": True, "n_predict": 12}),
    ("probs_post_xtc", "Lily", {"seed": 31, "temperature": 1.0,
     "n_probs": 3, "post_sampling_probs": True, "n_predict": 12,
     "xtc_probability": 1.0, "xtc_threshold": 0.02, "top_k": 0}),
]


def post(path, body):
    req = urllib.request.Request(
        f"http://127.0.0.1:{PORT}{path}", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    try:
        return json.load(urllib.request.urlopen(req))
    except urllib.error.HTTPError as e:
        sys.exit(f"{path} {body}: {e.code} {e.read().decode()}")


def probs_of(result, post_sampling):
    key, top, val = (("prob", "top_probs", "prob") if post_sampling else
                     ("logprob", "top_logprobs", "logprob"))
    return [{"chosen": step[key],
             "top": [[t["id"], t[val]] for t in step[top]]}
            for step in result.get("completion_probabilities", [])]


def record(name, prompt, fields):
    body = {"prompt": prompt, "n_predict": N_PREDICT, "return_tokens": True}
    body.update(fields)
    result = post("/completion", body)
    settings = result["generation_settings"]
    case = {
        "name": name,
        "prompt": prompt,
        "prompt_ids": post("/tokenize", {"content": prompt,
                                         "add_special": True})["tokens"],
        "request": body,
        "settings": {k: settings[k] for k in SETTINGS_KEYS},
        "gen_ids": result["tokens"],
        "stop_type": result["stop_type"],
    }
    if body.get("n_probs", 0) > 0:
        post_sampling = bool(body.get("post_sampling_probs", False))
        case["post_sampling_probs"] = post_sampling
        case["probs"] = probs_of(result, post_sampling)
    return case


SETTINGS_KEYS = [
    "seed", "temperature", "dynatemp_range", "dynatemp_exponent", "top_k",
    "top_p", "min_p", "top_n_sigma", "xtc_probability", "xtc_threshold",
    "typical_p", "repeat_last_n", "repeat_penalty", "presence_penalty",
    "frequency_penalty", "dry_multiplier", "dry_base", "dry_allowed_length",
    "dry_penalty_last_n", "dry_sequence_breakers", "mirostat",
    "mirostat_tau", "mirostat_eta", "adaptive_target", "adaptive_decay",
    "min_keep", "logit_bias", "samplers", "ignore_eos", "n_probs",
]


def main():
    cases = [record(*c) for c in CASES]
    text = json.dumps({
        "model": "kquant/st260K-x4.q8_0.gguf",
        "llama_cpp": "b10573 (3f545bec), AVX-512 build in ../shared/tools",
        "server_args": "-np 1 -c 256",
        "n_ctx_slot": 256,
        "cases": cases,
    }, indent=1)
    # Arrays of scalars on one line each, to keep the file short.
    text = re.sub(r"\[\s*([^\[\]{}]*?)\s*\]",
                  lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]",
                  text)
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
