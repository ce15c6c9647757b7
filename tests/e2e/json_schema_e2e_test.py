#!/usr/bin/env python3
"""json_schema and response_format outputs validate against their schemas.

Starts the real `kvault serve` on stories260K and on the small Q8_0 model of
docs/benchmarks.md, asks for JSON constrained by each schema below (nested
objects, arrays, enums, refs, unions, formats) at temperature 1.0 through
/completion `json_schema`, the OpenAI `response_format` json_schema form and
llama-server's json_object-with-schema form, and validates every output with
Debian's python3-jsonschema (draft 2020-12, formats checked). Exits non-zero
on the first invalid output, naming the schema, seed and output.

Usage: json_schema_e2e_test.py KVAULT_BINARY SHARED_DIR [--seeds N]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from json_schemas import SCHEMAS  # noqa: E402


class Server:
    """`kvault serve` on a free port; the port is read from its log."""

    def __init__(self, binary, model):
        self.proc = subprocess.Popen(
            [binary, "serve", "-m", model, "--port", "0", "-np", "2",
             "-c", "2048", "-t", "2"],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.port = None
        log = []
        for line in self.proc.stderr:
            log.append(line)
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if "ready:" in line:
                break
        if self.port is None:
            raise RuntimeError("server did not start:\n" + "".join(log))

    def post(self, path, body):
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as r:
            return json.load(r)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def generate(server, form, schema, seed):
    """Returns (text, finished) for one constrained request in `form`."""
    base = {"temperature": 1.0, "seed": seed, "max_tokens": 256}
    if form == "completion":
        r = server.post("/completion", {"prompt": "JSON:", "n_predict": 256,
                                         "temperature": 1.0, "seed": seed,
                                         "json_schema": schema})
        return r["content"], r["stop_type"] == "eos"
    if form == "response_format":
        fmt = {"type": "json_schema",
               "json_schema": {"name": "answer", "schema": schema}}
    else:
        fmt = {"type": "json_object", "schema": schema}
    body = dict(base, messages=[{"role": "user", "content": "Reply in JSON."}],
                response_format=fmt)
    r = server.post("/v1/chat/completions", body)
    choice = r["choices"][0]
    return choice["message"]["content"], choice["finish_reason"] == "stop"


def check_model(binary, model, seeds):
    server = Server(binary, model)
    failures, checked = [], 0
    forms = ["completion", "response_format", "json_object"]
    try:
        for i, (name, schema) in enumerate(SCHEMAS.items()):
            validator = jsonschema.Draft202012Validator(
                schema, format_checker=jsonschema.FormatChecker())
            for seed in range(1, seeds + 1):
                form = forms[(i + seed) % len(forms)]
                text, finished = generate(server, form, schema, seed)
                where = f"{name} seed {seed} ({form}): {text!r}"
                if not finished:
                    failures.append(f"{where}: cut at max tokens")
                    continue
                try:
                    validator.validate(json.loads(text))
                    checked += 1
                except (ValueError, jsonschema.ValidationError) as e:
                    failures.append(f"{where}: {str(e).splitlines()[0]}")
    finally:
        server.stop()
    print(f"{os.path.basename(model)}: {checked} outputs valid for "
          f"{len(SCHEMAS)} schemas, {len(failures)} failures")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("shared")
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    stories = os.path.join(args.shared, "models", "stories260K.gguf")
    vocab = os.path.join(args.shared, "vocab", "ggml-vocab-llama-spm.gguf")
    if not os.path.exists(stories):
        print("no ../shared models: skipped")
        return 0
    failures = check_model(args.binary, stories, args.seeds)
    with tempfile.TemporaryDirectory() as tmp:
        small = os.path.join(tmp, "small-q8.gguf")
        subprocess.run(
            [args.binary, "gen-model", "--arch", "llama", "--n-embd", "512",
             "--n-layer", "8", "--n-head", "8", "--n-head-kv", "4",
             "--n-ff", "1408", "--ctx", "2048", "--type", "q8_0", "--vocab",
             vocab, "--seed", "1", "-o", small],
            check=True, stdout=subprocess.DEVNULL)
        failures += check_model(args.binary, small, args.seeds)
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
