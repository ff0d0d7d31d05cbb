"""The --html report at 1,000 and 10,000 rows: render time and size against ``json.dumps`` of the
same document (what ``--json`` writes), and Chromium's load time against a 10-row report.

    python benchmarks/bench_compare_html.py [--rows 1000 10000] [--repeat 3]

Render time is the best of ``--repeat`` runs of ``render_html`` in CPU seconds (the figures
stay comparable on a busy machine); the browser figures are the wall and CPU time (user + sys
of all its processes) of ``chromium --headless=new --dump-dom`` (start, load, render,
serialise the DOM, exit) and the page's own ``data-render-ms`` (navigation start to the end of
the report script, wall time). Documents
come from tests/helpers/compare_docs.py (synthetic rows, no TensorFlow). Without Chromium the
browser columns are skipped (``make chromium`` installs it).
"""
import argparse
import json
import os
import resource
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from helpers.compare_docs import synthetic_doc  # noqa: E402
from npu_dump_hook.compare._html import render_html  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def doc_with_rows(n_rows):
    """A synthetic compare document cut to exactly ``n_rows`` rows."""
    doc = synthetic_doc(max(4, (n_rows * 3) // 4 + 2))
    doc["rows"] = doc["rows"][:n_rows]
    doc["root_causes"] = [row for row in doc["root_causes"] if row < n_rows]
    doc["summary"]["rows"] = n_rows
    return doc


def best_time(func, repeat):
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        result = func()
        best = min(best, time.process_time() - start)
    return best, result


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def chromium_load(path, profile):
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
                           "--user-data-dir=" + profile, "--dump-dom", "file://" + path],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=300)
    wall = time.perf_counter() - start
    cpu = _children_cpu() - cpu
    body = re.search(r"<body[^>]*>", done.stdout.decode(errors="replace"))
    tag = body.group(0) if body else ""
    ms = re.search(r'data-render-ms="(\d+)"', tag)
    return wall, cpu, int(ms.group(1)) if ms else None, 'data-rendered="1"' in tag


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("Python {} -- render_html vs json.dumps (what --json writes); load average {:.1f} on {} cores".format(
        sys.version.split()[0], os.getloadavg()[0], os.cpu_count()))
    print("{:>7} {:>11} {:>11} {:>6} {:>10} {:>10} {:>6}".format(
        "rows", "html cpu s", "json cpu s", "x", "html MB", "json MB", "x"))
    work = tempfile.mkdtemp(prefix="bench_html_")
    pages = {}
    try:
        for n_rows in [10] + args.rows:
            doc = doc_with_rows(n_rows)
            html_s, page = best_time(lambda: render_html(doc), args.repeat)
            json_s, text = best_time(lambda: json.dumps(doc, indent=1), args.repeat)
            path = os.path.join(work, "report_{}.html".format(n_rows))
            with open(path, "w", encoding="ascii") as handle:
                handle.write(page)
            pages[n_rows] = path
            if n_rows == 10:
                continue
            print("{:>7} {:>11.3f} {:>11.3f} {:>6.2f} {:>10.2f} {:>10.2f} {:>6.2f}".format(
                n_rows, html_s, json_s, html_s / json_s, len(page) / 1e6, len(text) / 1e6,
                len(page) / float(len(text))))
        if CHROMIUM is None:
            print("Chromium not installed (make chromium): browser load times skipped")
            return 0
        print("Chromium headless --dump-dom vs the 10-row report: wall s, CPU s, in-page render ms")
        base_wall, base_cpu, base_ms, _ = chromium_load(pages[10], os.path.join(work, "profile"))
        for n_rows in args.rows:
            wall, cpu, ms, ok = chromium_load(pages[n_rows], os.path.join(work, "profile"))
            print("{:>7} rows: wall {:.2f} vs {:.2f} s (x{:.2f}), cpu {:.2f} vs {:.2f} s (x{:.2f}), "
                  "render {} vs {} ms{}".format(n_rows, wall, base_wall, wall / base_wall, cpu, base_cpu,
                                                cpu / base_cpu, ms, base_ms, "" if ok else "  NOT RENDERED"))
            if not ok:
                return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
