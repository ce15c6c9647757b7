#!/usr/bin/env python3
"""Reads the suite's JUnit XML for scripts/conformance.

--write LLAMA KVAULT PASSES.txt DOC.md: writes docs/conformance.md
and the list of tests llama-server passes. LLAMA and KVAULT are junit
XML files or folders of them.
--check KVAULT PASSES.txt DOC.md: exits 1 when kvault passes fewer of
the listed tests than DOC.md records.
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

MARK = "kvault-passes-of-llama-server"


def results(path):
    """{test id: None if passed, else the first line of why not}, from a
    junit XML file or a folder of them."""
    paths = ([os.path.join(path, p) for p in sorted(os.listdir(path))
              if p.endswith(".xml")] if os.path.isdir(path) else [path])
    cases = [c for p in paths for c in ET.parse(p).getroot().iter("testcase")]
    out = {}
    for case in cases:
        test_file = case.get("classname", "").split(".")[-1]
        tid = f"{test_file}::{case.get('name')}"
        why = None
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                text = (node.get("message") or node.text or tag).strip()
                why = f"{tag}: {text.splitlines()[0][:160]}" if text else tag
                break
        out[tid] = why
    return out


# Why kvault does not pass (yet) what llama-server passes, per area: the
# issue that owns it, or what it would take.
NOT_YET = [
    ("test_router", "router mode (one server, several models loaded on "
     "demand: --models-dir/--models-preset, /models load and unload) is not "
     "done; it needs a model registry over several engines"),
    ("test_mcp_servers", "MCP servers are not done; they need a JSON-RPC "
     "client over stdio/HTTP and tool routing"),
    ("test_tools_builtin", "built-in tools (--tools: files, shell) are not "
     "done; they need a sandboxed tool runtime"),
    ("test_proxy", "the web UI's CORS proxy (--ui-mcp-proxy, /cors-proxy) is "
     "not done; it comes with the web UI issue"),
    ("test_chat_completion::test_completion_with_grammar", "grammars: the "
     "issue \"Structured output\""),
    ("test_chat_completion::test_completion_with_invalid_grammar", "grammars: "
     "the issue \"Structured output\""),
    ("test_chat_completion::test_completion_with_json_schema", "JSON schema: "
     "the issue \"Structured output\""),
    ("test_chat_completion::test_completion_with_response_format",
     "response_format: the issue \"Structured output\""),
    ("test_chat_completion::test_apply_chat_template", "Jinja templates: the "
     "issue \"Jinja chat templates, tool calls and reasoning\""),
    ("test_chat_completion::test_chat_template", "Jinja templates: the issue "
     "\"Jinja chat templates, tool calls and reasoning\""),
    ("test_chat_completion::test_chat_completion[None-Book-What is the best "
     "book-8-^ blue-23-8-length-True-This is not a chat template",
     "--chat-template with template source (not a built-in name) needs the "
     "Jinja engine: the issue \"Jinja chat templates, tool calls and "
     "reasoning\""),
    ("test_security::test_cors_origins_defaults_to_localhost_with_tools",
     "starts llama-server in router mode with built-in tools (see "
     "test_router, test_tools_builtin)"),
    ("test_security::test_cors_proxy_only_forwards", "the web UI's CORS "
     "proxy (see test_proxy)"),
    ("test_slot_save::test_slot_restore_legacy_token_list", "rewrites the "
     "token list inside llama.cpp's own state-file layout; kvault's state "
     "files are its own checksummed, model-bound format, so the edited file "
     "is (rightly) refused as corrupt"),
    ("test_kv_keep_only_active::test_clear_and_restore", "asserts "
     "llama-server's debug log tags for moving idle slots' KV to its prompt "
     "cache when another slot starts; kvault's paged pool leaves idle slots' "
     "KV in place until room is needed (then spills it to the RAM tier); "
     "the test's behavioural checks (cache_n > 0, fewer prompt tokens on "
     "the repeat) hold"),
]


def note_for(test_id):
    for prefix, why in NOT_YET:
        if test_id.startswith(prefix):
            return why
    return None


def passed(res):
    return {t for t, why in res.items() if why is None}


def write(llama_xml, kvault_xml, passes_txt, doc_md):
    llama, kvault = results(llama_xml), results(kvault_xml)
    lp, kp = passed(llama), passed(kvault)
    both = lp & kp
    with open(passes_txt, "w") as f:
        f.write("".join(t + "\n" for t in sorted(lp)))
    files = sorted({t.split("::")[0] for t in set(llama) | set(kvault)})
    lines = [
        "# llama.cpp's server test suite against kvault",
        "",
        "llama.cpp b10573's own server tests (tools/server/tests, pinned in",
        "../shared/conformance) run against the shared llama-server and against",
        "`kvault serve` on the same machine. Only stories260K is available",
        "offline and Python's `openai` client is not installed, so tests that",
        "need either fail for both servers; what counts is which of",
        "llama-server's passing tests kvault passes. Regenerate with",
        "`scripts/conformance`; CI runs `scripts/conformance --check`.",
        "",
        f"<!-- {MARK}: {len(both)} -->",
        f"kvault passes **{len(both)} of the {len(lp)}** tests llama-server "
        f"passes ({len(kp)} in all; the suite has {len(llama)}).",
        "",
        "| test file | tests | llama-server passes | kvault passes | "
        "of llama-server's |",
        "|---|---:|---:|---:|---:|",
    ]
    for f in files:
        ids = {t for t in set(llama) | set(kvault) if t.split("::")[0] == f}
        lines.append(f"| {f} | {len(ids)} | {len(ids & lp)} | {len(ids & kp)} "
                     f"| {len(ids & both)} |")
    lines += ["", "## llama-server passes, kvault does not", ""]
    for t in sorted(lp - kp):
        why = kvault.get(t, "not run")
        note = note_for(t)
        lines.append(f"- `{t}`: {why}" + (f" — **{note}**" if note else ""))
    with open(doc_md, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"kvault passes {len(both)} of llama-server's {len(lp)} passing "
          f"tests; wrote {doc_md}")


def check(kvault_xml, passes_txt, doc_md):
    want = {l for l in open(passes_txt).read().splitlines() if l}
    got = len(passed(results(kvault_xml)) & want)
    m = re.search(MARK + r": (\d+)", open(doc_md).read())
    if m is None:
        sys.exit(f"conformance: no '{MARK}' count in {doc_md}")
    recorded = int(m.group(1))
    print(f"conformance: kvault passes {got} of llama-server's {len(want)} "
          f"passing tests (recorded: {recorded})")
    if got < recorded:
        sys.exit(1)


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--write":
        write(*sys.argv[2:])
    elif len(sys.argv) == 5 and sys.argv[1] == "--check":
        check(*sys.argv[2:])
    else:
        sys.exit(__doc__)
