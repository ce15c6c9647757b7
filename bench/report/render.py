#!/usr/bin/env python3
"""Writes docs/benchmarks.md from scratch for scripts/bench.

Usage: render.py RESULTS TEMPLATE DOC IMG QUICK THREADS

RESULTS is the directory of one run (scripts/bench): NAME.json (one JSON
object per line, from `kvault bench ... --json`) and NAME.cmd (the command)
per scenario, host.json (the machine and build, recorded when the run
ended), models.cmd (the gen-model commands) and quants.md (the table of
scripts/bench-quants). TEMPLATE (bench/report/benchmarks.template.md) is
copied to DOC with each line that is only {{name}} replaced by that
generated part; a part whose data the run lacks is left out (and named on
stderr). Plots go to IMG as PNGs (gnuplot). QUICK is 1 for a --quick run.
"""
import datetime
import json
import os
import re
import subprocess
import sys

results, template, doc, img, quick, threads = sys.argv[1:7]
quick = quick == "1"

def rows(name):
    path = os.path.join(results, name + ".json")
    if not os.path.exists(path):
        return []
    return [json.loads(l) for l in open(path) if l.strip()]

def cmd(name):
    return open(os.path.join(results, name + ".cmd")).read().strip()

def plot(name, script, data):
    dat = os.path.join(results, name + ".dat")
    with open(dat, "w") as f:
        f.write(data)
    png = os.path.join(img, name + ".png")
    gp = ("set terminal pngcairo size 800,480 font 'sans,11'\n"
          f"set output '{png}'\nset grid\nset key top left\n"
          + script.replace("DAT", f"'{dat}'"))
    subprocess.run(["gnuplot"], input=gp, text=True, check=True)
    return f"![{name}](img/{name}.png)"

def host():
    """The machine and build the run used (host.json), else this machine's."""
    path = os.path.join(results, "host.json")
    if os.path.exists(path):
        return json.load(open(path))
    cpu = "unknown"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = 0
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal"):
            mem = int(line.split()[1]) / 1048576
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gib": mem,
            "load": os.getloadavg()[0]}

def generated():
    h = host()
    when = h.get("date") or datetime.datetime.utcnow().strftime(
        "%Y-%m-%d %H:%M UTC")
    mode = ("a quick run (`scripts/bench --quick`: small sizes, figures only "
            "show that everything runs)" if quick else "`scripts/bench`")
    parts = [f"Measured {when} by {mode}"]
    if h.get("commit"):
        parts.append(f"at commit {h['commit']}")
    text = " ".join(parts)
    if h.get("build_type"):
        text += f", {h['build_type']} build"
        if h.get("compiler"):
            text += f" ({h['compiler']})"
    return text + "."

def machine():
    h = host()
    text = (f"{h['cpu']}, {h['cores']} cores, {h['mem_gib']:.0f} GiB. "
            f"Benchmarks use {threads} compute threads.")
    io = rows("machine")
    if io:
        io = io[0]
        text += (f" Measured memcpy {io['memcpy_gbps']:.1f} GB/s, page-cache "
                 f"read {io['read_gbps']:.1f} GB/s (`{cmd('machine')}`).")
    if h.get("load") is not None:
        text += (f" Load average at the end of the run: {h['load']:.1f} "
                 "(other processes on the same cores make every figure "
                 "noisier).")
    return text

def table(header, body):
    out = ["| " + " | ".join(header) + " |",
           "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in body]
    return "\n".join(out)

def defrag():
    rs = rows("defrag-cost")
    if not rs:
        return ""
    body = [[f"{r['pool_mib']:.1f}", f"{r['target_fragmentation']:.1f}",
             f"{r['fragmentation']:.3f}", f"{r['bytes_moved']/2**20:.1f}",
             f"{r['defrag_ms']:.2f}", f"{r['defrag_gbps']:.2f}",
             f"{r['memcpy_ms']:.2f}",
             f"{r['defrag_ms']/r['memcpy_ms']:.1f}x" if r['memcpy_ms'] else "-"]
            for r in rs]
    data = "".join(f"{r['bytes_moved']/2**20} {r['defrag_ms']} {r['memcpy_ms']}\n"
                   for r in sorted(rs, key=lambda r: r['bytes_moved'])
                   if r['bytes_moved'])
    pic = plot("defrag-cost",
               "set logscale xy\nset xlabel 'bytes moved (MiB)'\n"
               "set ylabel 'time (ms)'\nset title 'Full defragmentation "
               "vs memcpy of the same bytes'\n"
               "plot DAT using 1:2 with linespoints title 'KvCache::Defrag()', "
               "DAT using 1:3 with linespoints title 'memcpy'\n", data)
    half = [r for r in rs if abs(r['target_fragmentation'] - 0.5) < 0.01]
    best = next((r for r in half if abs(r['pool_mib'] - 1024) < 16),
                max(half, key=lambda r: r['pool_mib'], default=rs[-1]))
    ratio = sum(r['defrag_ms'] for r in rs) / max(1e-9, sum(r['memcpy_ms'] for r in rs))
    summary["defrag"] = best
    text = (f"Defragmenting a {round(best['pool_mib'] / 64) * 64} MiB pool at "
            f"{best['fragmentation']:.0%} fragmentation moved "
            f"{best['bytes_moved']/2**20:.0f} MiB in {best['defrag_ms']:.1f} ms; "
            f"over all runs a defragmentation takes {ratio:.1f}x the time of a "
            "memcpy of the bytes it moves, so its cost is the bytes moved, "
            "which grow with the pool and with how far the holes sit from "
            "the pool's start.")
    return ("## Defrag cost (scenario 4)\n\n"
            "A KV pool (TinyLlama layout, 22 layers x 4 KV heads x 64, f16, "
            "page 16) filled with 64-token sequences; 25 % of them removed "
            "(one run in the middle + single holes spread evenly) so that "
            "fragmentation = 1 - largest free run / free cells is near the "
            "target; then one `KvCache::Defrag()` (plan + copies + remap); "
            "every sequence's bytes are checked afterwards.\n\n"
            f"    {cmd('defrag-cost')}\n\n" +
            table(["pool MiB", "target", "fragmentation", "moved MiB",
                   "defrag ms", "defrag GB/s", "memcpy ms", "defrag/memcpy"],
                  body) + f"\n\n{pic}\n\n{text}\n")

def rvr(name, title):
    rs = rows(name)
    if not rs:
        return ""
    body = [[r['n_tokens'], f"{r['file_bytes']/2**20:.2f}",
             f"{r['restore_ttft_ms']:.2f}", f"{r['restore_io_ms']:.2f}",
             f"{r['recompute_ttft_ms']:.2f}", f"{r['speedup']:.1f}x"]
            for r in rs]
    data = "".join(f"{r['n_tokens']} {r['restore_ttft_ms']} "
                   f"{r['recompute_ttft_ms']}\n" for r in rs)
    pic = plot(name, "set logscale xy\nset xlabel 'conversation length "
               "(tokens)'\nset ylabel 'time to first token (ms)'\n"
               f"set title 'Continuing a conversation: restore vs recompute ({title})'\n"
               "plot DAT using 1:3 with linespoints title 're-prefill', "
               "DAT using 1:2 with linespoints title 'restore state file + 1 decode'\n",
               data)
    last = rs[-1]
    text = (f"At {last['n_tokens']} tokens restoring is "
            f"{last['speedup']:.0f}x faster than recomputing "
            f"({last['restore_ttft_ms']:.1f} ms vs "
            f"{last['recompute_ttft_ms']:.0f} ms); prefill grows at least "
            "linearly with the length while restore is a read of the file.")
    return (f"## Restore vs recompute, {title} (scenario 2)\n\n"
            "Time to first token of continuing a conversation of L tokens: "
            "restore its state file (page cache, no fsync) into a fresh cache "
            "and decode one token, vs prefill the L + 1 tokens again in "
            "chunks of 512. Medians after a warm-up.\n\n"
            f"    {cmd(name)}\n\n" +
            table(["tokens", "file MiB", "restore TTFT ms", "of which I/O ms",
                   "recompute TTFT ms", "speedup"], body) +
            f"\n\n{pic}\n\n{text}\n")

def tiers():
    rs = rows("prefix-tiers")
    if not rs:
        return ""
    srcs, thr = rs[:-1], rs[-1]
    names = {"recompute": "recompute (prefill L + 1)",
             "pool": "pool hit (1 decode step)",
             "ram": "RAM tier (state bytes in memory)",
             "disk": "disk tier, store reopened (after a restart)",
             "redis": "Redis tier, another instance"}
    body = [[names.get(r["source"], r["source"]), r["cached_tokens"],
             f"{r['ttft_ms']:.1f}", f"{r['speedup']:.1f}x"] for r in srcs]
    text = (f"### Prefix store throughput\n\n{thr['num_records']} page "
            f"records of {thr['record_bytes']} bytes: written through the "
            f"Redis tier at {thr['redis_write_gbps']:.3f} GB/s (queued, "
            "pipelined, until flushed), read back one Get at a time, four "
            "passes over the records (as many GETs as redis-benchmark "
            f"sends below), at {thr['redis_read_gbps']:.3f} GB/s. (A "
            "conversation's chain is read 8 records per round trip.)")
    rb = rows("redis-benchmark")
    if rb:
        b = rb[0]
        text += (f" redis-benchmark with one client on the same value size "
                 f"(SET of new keys, GET over as many existing keys): SET {b.get('set_gbps', 0):.3f} GB/s, GET "
                 f"{b.get('get_gbps', 0):.3f} GB/s; the tier reaches "
                 f"{thr['redis_write_gbps'] / max(b.get('set_gbps', 1e-9), 1e-9):.2f}x "
                 f"and {thr['redis_read_gbps'] / max(b.get('get_gbps', 1e-9), 1e-9):.2f}x "
                 f"of that.\n\n    {cmd('redis-benchmark')}")
    return (f"## Continuing a conversation from each tier (scenario 7)\n\n"
            f"Time to first token of continuing a conversation of "
            f"{srcs[0]['n_tokens']} tokens, by where its KV comes from "
            "(bench/scenarios/prefix_tiers.h); records are read from the "
            "page cache and a local redis-server. Medians after a "
            "warm-up.\n\n"
            f"    {cmd('prefix-tiers')}\n\n" +
            table(["source", "tokens not evaluated", "TTFT ms", "speedup"],
                  body) + f"\n\n{text}\n")

def decode():
    rs = rows("decode-fragmentation")
    if not rs:
        return ""
    body = [[r['page_size'], r['depth'], f"{r['contiguous_tok_s']:.1f}",
             f"{r['fragmented_tok_s']:.1f}", f"{r['slowdown_pct']:.1f} %"]
            for r in rs]
    pages = sorted({r['page_size'] for r in rs})
    data = ""
    for p in pages:
        data += "".join(f"{r['depth']} {r['slowdown_pct']}\n"
                        for r in rs if r['page_size'] == p) + "\n\n"
    series = ", ".join(f"DAT index {i} using 1:2 with linespoints title "
                       f"'page size {p}'" for i, p in enumerate(pages))
    pic = plot("decode-fragmentation",
               "set xlabel 'cached context (tokens)'\n"
               "set ylabel 'generation slowdown, fragmented vs contiguous (%)'\n"
               "set title 'Decode throughput cost of a fully fragmented KV cache'\n"
               f"plot {series}\n", data)
    lo = min(r['slowdown_pct'] for r in rs)
    hi = max(r['slowdown_pct'] for r in rs)
    mean = sum(r['slowdown_pct'] for r in rs) / len(rs)
    per_page = ", ".join(
        f"{sum(r['slowdown_pct'] for r in rs if r['page_size'] == p) / max(1, sum(1 for r in rs if r['page_size'] == p)):.1f} % "
        f"at page size {p}" for p in pages)
    longest = max(r['depth'] for r in rs)
    at_longest = ", ".join(f"{r['slowdown_pct']:.1f} % (page {r['page_size']})"
                           for r in rs if r['depth'] == longest)
    text = (f"Decoding from a maximally interleaved cache slowed generation "
            f"by {mean:.1f} % on average ({per_page}; single points range "
            f"{lo:+.1f} .. {hi:+.1f} %, negative: faster than contiguous). "
            f"At {longest} cached tokens: {at_longest}. Run-to-run noise on "
            "this shared 2-core machine is several percent, so single points "
            "mean little; the averages are the answer.")
    summary["decode_pages"] = per_page
    summary["decode"] = (mean, lo, hi)
    summary["decode_depths"] = (min(r['depth'] for r in rs), longest)
    return ("## Fragmentation cost on decode (scenario 3)\n\n"
            "Generation tok/s after D cached tokens with the sequence's pages "
            "contiguous vs every other page held by another sequence (the "
            "pool hands the free ones out lowest first, so the sequence's "
            "pages ascend in memory).\n\n"
            f"    {cmd('decode-fragmentation')}\n\n" +
            table(["page size", "context", "contiguous tok/s",
                   "fragmented tok/s", "slowdown"], body) +
            f"\n\n{pic}\n\n{text}\n")

def stall_plot(r, name):
    last, data = {}, {}
    for slot, ms in sorted(r.get("arrivals", []), key=lambda a: a[1]):
        if slot in last:
            data.setdefault(slot, []).append(f"{ms} {ms - last[slot]}\n")
        last[slot] = ms
    dat = "".join("".join(v) + "\n\n" for _, v in sorted(data.items()))
    series = ", ".join(f"DAT index {i} using 1:2 with points pt 7 ps 0.5 "
                       f"title 'slot {s}'" for i, s in enumerate(sorted(data)))
    mib = r['restore_bytes'] / 2**20
    return plot(name, "set xlabel 'time since the first token (ms)'\n"
                "set ylabel 'inter-token latency (ms)'\nset yrange [0:*]\n"
                f"set object 1 rect from {r.get('restore_begin_ms', 0)}, "
                f"graph 0 to {r.get('restore_end_ms', 0)}, graph 1 behind "
                "fillcolor rgb '#dddddd' fillstyle solid noborder\n"
                f"set title 'Generating slots while another slot restores "
                f"{mib:.0f} MiB (grey: the restore)'\nplot {series}\n", dat)

def stall():
    rs = sorted(rows("neighbour-stall"), key=lambda r: r['restore_bytes'])
    if not rs:
        return ""
    body = [[f"{r['restore_bytes']/2**20:.1f}", f"{r['restore_ms']:.1f}",
             f"{r['itl_median_before_ms']:.2f}", f"{r['itl_max_before_ms']:.2f}",
             f"{r['itl_median_during_ms']:.2f}",
             f"{r['itl_max_during_ms']:.2f}", f"{r['itl_p99_ms']:.2f}"]
            for r in rs]
    pics = "\n\n".join(
        stall_plot(r, "neighbour-stall" if i == len(rs) - 1 else
                   f"neighbour-stall-{r['restore_bytes'] / 2**20:.0f}mib")
        for i, r in enumerate(rs))
    r = rs[-1]
    summary["stall"] = r
    return ("## Neighbour stall (scenario 6)\n\n"
            "Inter-token latency of 4 slots generating while one more slot "
            "restores a state file (engine, continuous batching; the "
            "restore's reads and checksums run on the engine's I/O thread).\n\n"
            f"    {cmd('neighbour-stall')}\n\n" +
            table(["restore MiB", "restore ms", "ITL median before ms",
                   "ITL max before ms", "ITL median during ms",
                   "ITL max during ms", "ITL p99 ms"], body) +
            f"\n\n{pics}\n\n"
            f"While one slot restored {r['restore_bytes']/2**20:.0f} MiB "
            f"({r['restore_ms']:.0f} ms), the generating slots' median "
            f"inter-token latency went from {r['itl_median_before_ms']:.1f} ms "
            f"to {r['itl_median_during_ms']:.1f} ms (worst gap "
            f"{r['itl_max_during_ms']:.1f} ms, worst before the restore "
            f"{r['itl_max_before_ms']:.1f} ms): the other slots keep "
            "generating through a restore.\n")

def io():
    rs = sorted(rows("state-io"), key=lambda r: r['bytes'])
    if not rs:
        return ""
    cols = [("save_gbps", "save (page cache)"),
            ("save_fsync_gbps", "save + fsync"),
            ("restore_gbps", "restore, contiguous pool"),
            ("restore_fragmented_gbps", "restore, fragmented pool"),
            ("read_gbps", "pread of the file"), ("memcpy_gbps", "memcpy")]
    fmt = lambda v: "-" if v is None else f"{v:.2f}"
    body = [[f"{r['bytes']/2**20:.1f}"] + [fmt(r.get(c)) for c, _ in cols]
            for r in rs]
    data = "".join(f"{r['bytes']/2**20} " + " ".join(
        str(r.get(c) if r.get(c) is not None else "NaN") for c, _ in cols)
        + "\n" for r in rs)
    series = ", ".join(f"DAT using 1:{i + 2} with linespoints title '{t}'"
                       for i, (_, t) in enumerate(cols))
    pic = plot("state-io", "set logscale x\nset xlabel 'state file size (MiB)'\n"
               "set ylabel 'throughput (GB/s)'\nset key outside right\n"
               "set title 'Slot save and restore throughput vs file size'\n"
               f"plot {series}\n", data)
    big = rs[-1]
    summary["io"] = big
    return ("## Save/restore I/O (scenario 5)\n\n"
            "One sequence's state file (TinyLlama layout: 22 layers x 4 KV "
            "heads x 64, f16, page 16) saved with and without fsync, and "
            "restored (read, checksum-verified, into the cells) into a "
            "contiguous and into a fragmented pool; next to a plain pread of "
            "the same file from the page cache and a memcpy of the same "
            "bytes. Medians.\n\n"
            f"    {cmd('state-io')}\n\n" +
            table(["file MiB"] + [t + " GB/s" for _, t in cols], body) +
            f"\n\n{pic}\n\n"
            f"At {big['bytes']/2**20:.0f} MiB a restore runs at "
            f"{fmt(big.get('restore_fragmented_gbps'))} GB/s into a fragmented "
            f"pool ({fmt(big.get('restore_gbps'))} GB/s contiguous) against "
            f"{fmt(big.get('read_gbps'))} GB/s for a bare pread and "
            f"{fmt(big.get('memcpy_gbps'))} GB/s for memcpy; a durable save "
            f"(fsync) runs at {fmt(big.get('save_fsync_gbps'))} GB/s vs "
            f"{fmt(big.get('save_gbps'))} GB/s into the page cache.\n" +
            io_threads())

def io_threads():
    rs = sorted(rows("state-io-threads"), key=lambda r: r['restore_threads'])
    if not rs:
        return ""
    ratio = lambda r, c: f"{r[c] / r['read_gbps']:.2f}" if r.get(c) else "-"
    body = [[str(r['restore_threads']), f"{r['restore_gbps']:.2f}",
             f"{r['restore_fragmented_gbps']:.2f}", f"{r['read_gbps']:.2f}",
             ratio(r, 'restore_gbps'), ratio(r, 'restore_fragmented_gbps')]
            for r in rs]
    return ("\nA restore reads each chunk through a 256 KiB buffer per thread "
            "straight into its cells, hashing every piece as it is copied; "
            "one core's copy plus hash is slower than the kernel's copy "
            "alone, so several threads (the engine uses 2) take chunks in "
            f"turn. The same {rs[0]['bytes']/2**20:.0f} MiB file by thread "
            "count, each row with its own interleaved pread:\n\n"
            f"    {cmd('state-io-threads')}\n\n" +
            table(["restore threads", "contiguous GB/s", "fragmented GB/s",
                   "pread GB/s", "contiguous / pread", "fragmented / pread"],
                  body) + "\n")

summary = {}

def churn():
    rs = rows("churn")
    if not rs:
        return ""
    pct = lambda v: f"{100 * v:.0f} %"
    ms = lambda v: "-" if v is None else f"{v:.0f}"
    body = [[r['config'], r['cells'],
             f"{r['restore_ok']}/{r['restore_attempts']} ({pct(r['restore_success_rate'])})",
             pct(r['slot_usage']), pct(r['pool_utilization']),
             f"{ms(r['restore_ms_p50'])} / {ms(r['restore_ms_p99'])}",
             f"{r['defrag_ms_total']:.1f} ({r['num_defrags']})",
             r['recompute_turns'], f"{r['gen_tok_s']:.1f}",
             f"{ms(r['ttft_ms_p50'])} / {ms(r['ttft_ms_p99'])}",
             f"{r['evictions']} / {r['spilled_bytes']/2**20:.0f} MiB"]
            for r in rs]
    data = "".join(f"\"{r['config']}\" {100 * r['restore_success_rate']} "
                   f"{100 * r['slot_usage']}\n" for r in rs)
    pic = plot("churn", "set style data histograms\n"
               "set style histogram clustered gap 1\n"
               "set style fill solid 0.8 border -1\nset boxwidth 0.9\n"
               "set yrange [0:125]\nset ylabel 'percent'\n"
               "set xtics font ',9'\n"
               "set xlabel 'KV placement policy'\n"
               "set key top center horizontal\n"
               "set title 'Churn on the real engine: restores that succeed, "
               "slots still in use'\n"
               "plot DAT using 2:xtic(1) title 'restores that succeeded', "
               "'' using 3 title 'slot usage'\n", data)
    by = {r['config']: r for r in rs}
    summary["churn"] = by
    parts = []
    c = by.get("contiguous")
    if c:
        parts.append(
            f"First-fit contiguous placement failed {c['restore_attempts'] - c['restore_ok']} "
            f"of {c['restore_attempts']} restores; each fell back to a re-prefill "
            f"(TTFT p50 {ms(c.get('ttft_recomputed_ms_p50'))} ms vs "
            f"{ms(c.get('ttft_restored_ms_p50'))} ms for a restored turn).")
    sh = by.get("contiguous+shrink")
    if sh:
        parts.append(
            f"The request's workaround kept {pct(sh['slot_usage'])} of the "
            f"slots in use (ended with {sh['final_active_slots']} of "
            f"{sh['slots']}) and still failed "
            f"{sh['restore_attempts'] - sh['restore_ok']} restores.")
    d = by.get("contiguous+defrag")
    if d:
        parts.append(
            f"Defragmenting before a restore that found no run restored "
            f"{pct(d['restore_success_rate'])} at {d['defrag_ms_total']:.1f} ms "
            f"of defragmentation in {d['num_defrags']} runs "
            f"({d['cells_moved']} cells moved).")
    pg = by.get("paged")
    if pg:
        parts.append(f"Paged placement restored {pct(pg['restore_success_rate'])} "
                     f"with every slot in use.")
    sp = by.get("paged+spill")
    if sp:
        parts.append(
            f"With the pool halved ({sp['cells']} cells, smaller than the "
            f"working set) paged restored {pct(sp['restore_success_rate'])}: "
            f"{sp['evictions']} idle slots were spilled to RAM "
            f"({sp['spilled_bytes']/2**20:.0f} MiB) and came back without "
            "recompute; the price is TTFT spent waiting for room "
            f"(p50 {ms(sp['ttft_ms_p50'])} ms vs {ms(pg['ttft_ms_p50']) if pg else '-'} ms).")
    return ("## Churn, end to end (scenario 1)\n\n"
            "The request's workload on the real engine (small model, "
            "continuous batching): S slots, M saved conversations; each turn "
            "restores a conversation no slot holds into a slot (erase, then "
            "restore its file), appends a user message, generates, and saves "
            "the slot back. A restore that finds no room falls back to "
            "re-prefilling the conversation (nothing is lost; its TTFT is a "
            "recompute). Policies: `contiguous` (first fit), "
            "`contiguous+shrink` (the request's workaround: one slot less "
            "after each failed restore), `contiguous+defrag` (defragment, "
            "then restore), `paged`, and `paged+spill` (half the pool; idle "
            "slots spill to the RAM tier).\n\n"
            f"    {cmd('churn')}\n\n" +
            table(["policy", "pool cells", "restores ok", "slot usage",
                   "pool used", "restore ms p50 / p99", "defrag ms (runs)",
                   "recomputed turns", "gen tok/s", "TTFT ms p50 / p99",
                   "spills / bytes"], body) +
            f"\n\n{pic}\n\n" + " ".join(parts) + "\n")

def answers():
    if "defrag" not in summary or "decode" not in summary:
        return ""
    io = (rows("machine") or [{}])[0]
    d = summary["defrag"]
    mean, lo, hi = summary["decode"]
    frag_io = ""
    if io.get("restore_gbps"):
        frag_io = (f" Restoring a state file into a fragmented pool runs at "
                   f"{io['restore_fragmented_gbps']:.2f} GB/s vs "
                   f"{io['restore_gbps']:.2f} GB/s into a contiguous one "
                   f"(page 16, `{cmd('machine')}`).")
    churn = ""
    by = summary.get("churn", {})
    c, pg, df = by.get("contiguous"), by.get("paged"), by.get("contiguous+defrag")
    if c and pg:
        churn = (f" On the request's own workload (scenario 1) first-fit "
                 f"contiguous placement restored "
                 f"{100 * c['restore_success_rate']:.0f} % of conversations "
                 f"and paged placement {100 * pg['restore_success_rate']:.0f} %"
                 + (f"; defragmenting on demand restored "
                    f"{100 * df['restore_success_rate']:.0f} % for "
                    f"{df['defrag_ms_total']:.1f} ms of defragmentation over "
                    f"{df['turns']} turns" if df else "") + ".")
    noise = f" ({summary.get('decode_pages', '')})"
    return ("**The request's two questions.** *What are the performance "
            "implications of defragmenting?* "
            f"Defragmenting a {round(d['pool_mib'] / 64) * 64} MiB pool at "
            f"{d['fragmentation']:.0%} fragmentation moved "
            f"{d['bytes_moved']/2**20:.0f} MiB in {d['defrag_ms']:.1f} ms "
            f"({d['defrag_ms']/max(d['memcpy_ms'], 1e-9):.1f}x a memcpy of the "
            "same bytes), during which the cache cannot be used: the cost is "
            "the bytes moved. *What are the performance implications of "
            "allocating in a fragmented manner?* Decoding from a fully "
            f"interleaved cache slowed generation by {mean:.1f} % on average "
            f"over contexts {summary['decode_depths'][0]}-"
            f"{summary['decode_depths'][1]} and page sizes{noise}; paged placement "
            "with large pages costs least." + frag_io + churn + "\n")

def quants(marker="quants"):
    """scripts/bench-quants' table (`--isa avx2`: quants-avx2.md)."""
    path = os.path.join(results, marker + ".md")
    if not os.path.exists(path):
        return ""
    # The markers let scripts/bench-quants replace the table alone.
    return (f"<!-- {marker}:begin -->\n" + open(path).read().rstrip("\n") +
            f"\n<!-- {marker}:end -->")

def code_block(command, width=80):
    """`command` as an indented block, wrapped with backslashes."""
    words, units = command.split(), []
    for w in words:  # a flag stays on the line of its value
        if units and units[-1].startswith("-") and " " not in units[-1] \
                and not w.startswith("-"):
            units[-1] += " " + w
        else:
            units.append(w)
    lines, line = [], "   "
    for word in units:
        if len(line) + 1 + len(word) > width - 2 and line.strip():
            lines.append(line + " \\")
            line = "       "
        line += " " + word
    return "\n".join(lines + [line])

def models():
    path = os.path.join(results, "models.cmd")
    if not os.path.exists(path):
        return ""
    return "\n".join(code_block(l) for l in open(path) if l.strip())

# Scenario parts first: the summary reads what they found.
parts = {
    "churn": churn(),
    "defrag-cost": defrag(),
    "restore-vs-recompute": rvr("restore-vs-recompute", "small model"),
    "restore-vs-recompute-tinyllama":
        rvr("restore-vs-recompute-tinyllama", "TinyLlama shape"),
    "prefix-tiers": tiers(),
    "decode-fragmentation": decode(),
    "state-io": io(),
    "neighbour-stall": stall(),
    "quants": quants(),
    "quants-avx2": quants("quants-avx2"),
    "models": models(),
}
parts["answers"] = answers()
parts["machine"] = machine()
parts["generated"] = generated()

text = open(template).read()
if text.startswith("<!--"):  # the template's own comment
    text = text[text.index("-->") + 3:].lstrip("\n")
out, missing = [], []
for line in text.split("\n"):
    m = re.fullmatch(r"\{\{([a-z0-9-]+)\}\}", line.strip())
    if not m:
        out.append(line)
        continue
    name = m.group(1)
    if name not in parts:
        sys.exit(f"render.py: {template}: unknown part {{{{{name}}}}}")
    if parts[name].strip():
        out.append(parts[name].rstrip("\n"))
    else:
        missing.append(name)
        out.append("\0")  # dropped below, with the blank line after it
page = "\n".join(out)
page = re.sub(r"\0\n\n?", "", page)
page = re.sub(r"\n{3,}", "\n\n", page).rstrip("\n") + "\n"
if missing:
    print("render.py: no data for " + ", ".join(missing) +
          ": left out of " + doc, file=sys.stderr)
os.makedirs(os.path.dirname(os.path.abspath(doc)), exist_ok=True)
open(doc, "w").write(page)
