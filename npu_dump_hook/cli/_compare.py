"""``compare``: argument handling, files and printing over :func:`npu_dump_hook.compare.compare`.

Exit codes (the table is :mod:`._exit`): 0 no root cause (every compared tensor within the
thresholds, or inheriting its error from upstream); 1 a root cause (an op that breaches a
threshold or overflows while nothing it depends on does) or the two runs' first inputs differ
("input inconsistent"), or the comparison is incomplete (dumped tensors not compared, unless
``--allow-uncompared``); 2 usage: a
bad option value, NPU/GOLDEN/--graph that do not exist, an output file whose folder does not
exist; 3 anything else (NPU is not a bundle or dump folder, no golden found, unreadable
graph, writing a report failed).

SIGTERM during the comparison ends it with exit status 143 after its clean-up (the temporary
extraction of an archive removed, the worker processes stopped).

stdout carries the one-screen summary; ``--csv``/``--json``/``--html`` files are written
atomically (a reader never sees half a file). Progress goes to stderr when it is a terminal.
"""
import argparse
import math
import os
import sys
import time
from typing import Any, Callable

from ._exit import EXIT_USAGE, CliError, pending
from ._output import say

__all__ = ["run", "add_arguments", "threshold_value", "OFF", "HELP_DEFAULTS", "STATS_HELP_DEFAULTS"]

_OFF = ("off", "none")
#: What a threshold option is when the user turned it off (None means: not given).
OFF = "off"


def threshold_value(text: str) -> Any:
    """A threshold option value: a finite number >= 0, or "off"/"none" (:data:`OFF`: turned off)."""
    if text.strip().lower() in _OFF:
        return OFF
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("{!r} is not a number (or off)".format(text))
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError("{!r} must be a finite number >= 0 (or off)".format(text))
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("{!r} is not an integer".format(text))
    if value < 1:
        raise argparse.ArgumentTypeError("{!r} must be at least 1".format(text))
    return value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("{!r} is not an integer".format(text))
    if value < 0:
        raise argparse.ArgumentTypeError("{!r} must be >= 0".format(text))
    return value


#: The defaults shown in --help, as npu_dump_hook.compare.DEFAULT_THRESHOLDS has them (a test
#: checks they agree); not imported from there, so building the parser loads no numpy.
HELP_DEFAULTS = {"cosine_min": 0.99, "magnitude_err_max": 0.01}
#: The same for npu_dump_hook.compare.DEFAULT_STATS_THRESHOLDS (the statistics compare).
STATS_HELP_DEFAULTS = {"value_rel_max": 0.03, "norm_rel_max": 0.03}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``compare`` (registered by :func:`npu_dump_hook.cli.build_parser`)."""
    p.add_argument("npu", metavar="NPU", nargs="?",
                   help="NPU bundle (folder or .tar/.tar.gz), a dump step folder (+ --graph), or a rank index (a "
                        "bundle root with index.json: every rank compared, then merged)")
    p.add_argument("golden", metavar="GOLDEN", nargs="?",
                   help="golden bundle or folder of msaccucmp-named .npy files (default: the NPU bundle's data/golden; "
                        "when it has none, only the checks that need no golden: NaN/Inf origin and overflow report)")
    p.add_argument("--graph", help="Build graph, ge_proto_*_Build.txt or its msaccucmp .json (default: the bundle's)")
    p.add_argument("--csv", metavar="F", help="write msaccucmp's CSV (same header and row order) to F")
    p.add_argument("--json", metavar="F", help="write the JSON document (rows, summary, first divergence) to F")
    p.add_argument("--html", metavar="F", help="write a self-contained HTML report to F")
    p.add_argument("--top", metavar="N", type=_non_negative, default=5, help="worst rows in the summary (default 5)")
    limits = p.add_argument_group("thresholds (a row breaches when one is crossed; 'off' turns one off)")
    limits.add_argument("--cosine-min", metavar="X", type=threshold_value,
                        help="lowest CosineSimilarity (default {})".format(HELP_DEFAULTS["cosine_min"]))
    limits.add_argument("--magnitude-err-max", metavar="X", type=threshold_value,
                        help="highest magnitude error, the part of RelativeEuclideanDistance the cosine does not "
                             "explain, ~ | |npu|/|golden| - 1 | (default {})".format(HELP_DEFAULTS["magnitude_err_max"]))
    limits.add_argument("--rel-euclid-max", metavar="X", type=threshold_value,
                        help="highest RelativeEuclideanDistance (default off)")
    limits.add_argument("--max-rel-err", metavar="X", type=threshold_value,
                        help="highest MaxRelativeError (default off)")
    limits.add_argument("--mean-rel-err", metavar="X", type=threshold_value,
                        help="highest MeanRelativeError (default off)")
    limits.add_argument("--check-scalars", action="store_true", default=None,
                        help="also check one-element tensors (default: compared, not checked)")
    stats = p.add_argument_group("statistics compare (a dump_data=stats bundle against its golden statistics)")
    stats.add_argument("--stats-value-rel-max", metavar="X", type=threshold_value,
                       help="highest relative difference of Max, Min, Avg (default {})".format(
                           STATS_HELP_DEFAULTS["value_rel_max"]))
    stats.add_argument("--stats-norm-rel-max", metavar="X", type=threshold_value,
                       help="highest relative difference of the L2 norm (default {})".format(
                           STATS_HELP_DEFAULTS["norm_rel_max"]))
    p.add_argument("--ops", metavar="REGEX", help="only ops whose NPU name or an original op name matches")
    p.add_argument("--step", metavar="N", type=_non_negative, help="dump step folder to compare (default: the lowest)")
    p.add_argument("--workers", metavar="N", type=_positive, help="processes (default: every core)")
    p.add_argument("--allow-uncompared", action="store_true",
                   help="pass on the compared rows even when some dumped tensors could not be compared (broken "
                        "dump or golden files, shape mismatches, ops with a dump file but no compared row); "
                        "without it such a comparison is INCOMPLETE, exit 1")
    p.add_argument("--merge", metavar="JSON", nargs="+",
                   help="merge the --json documents of compares over rank indexes (one per node) into one verdict: "
                        "earliest divergence across ranks and the cross-rank collective check (no NPU/GOLDEN)")
    p.add_argument("--suspects-out", metavar="F",
                   help="write the suspects file to F: the ops a targeted second dump should hold (first "
                        "divergence, root causes, NaN/Inf origins, overflow ops, and their producers), for "
                        "run --dump-layer-from F; no file when nothing is suspect")
    p.add_argument("--suspects", metavar="N", type=_positive, default=None,
                   help="with --suspects-out: at most N primary suspects, each with its producers (default 5)")
    p.add_argument("--determinism", action="store_true",
                   help="NPU and GOLDEN are two NPU bundles of one configuration: list every op whose outputs "
                        "differ bit for bit (execution order), the first named; exit 1 when any does")
    p.add_argument("--replay", metavar="N|all", nargs="?", const="1", type=_replay_count,
                   help="replay the first N root causes (default 1: the first divergence; 'all') on CPU: the "
                        "original TF op(s) rebuilt from the NPU bundle's TF graph, fed the NPU's dumped inputs "
                        "(dump_mode all or input), float32 and float64; verdict kernel / inherited / precision "
                        "(needs TensorFlow, run in a subprocess; the exit code is compare's)")
    p.add_argument("--replay-op", metavar="NAME",
                   help="replay every output row of this NPU op or original TF op instead (as --replay)")


def _replay_count(value: str) -> str:
    if value == "all" or (value.isdigit() and int(value) > 0):
        return value
    raise argparse.ArgumentTypeError("must be a positive number of root causes or 'all', not {!r}".format(value))


def _check_paths(args: argparse.Namespace) -> None:
    if (args.npu is None) == (not args.merge):
        raise CliError("compare: give NPU [GOLDEN], or --merge JSON... (not both)", EXIT_USAGE)
    for path in args.merge or ():
        if not os.path.isfile(path):
            raise CliError("compare: --merge {}: no such file".format(path), EXIT_USAGE)
    for label, path in (("NPU", args.npu), ("GOLDEN", args.golden), ("--graph", args.graph)):
        if path is not None and not os.path.exists(path):
            raise CliError("compare: {} {}: no such file or folder".format(label, path), EXIT_USAGE)
    if args.suspects is not None and args.suspects_out is None:
        raise CliError("compare: --suspects needs --suspects-out", EXIT_USAGE)
    for option in ("csv", "json", "html", "suspects_out"):
        target = getattr(args, option)
        if target is None:
            continue
        folder = os.path.dirname(os.path.abspath(target))
        if not os.path.isdir(folder) or os.path.isdir(target):
            raise CliError("compare: --{} {}: {}".format(option.replace("_", "-"), target, "is a folder" if os.path.isdir(target)
                                                         else "its folder does not exist"), EXIT_USAGE)


def _thresholds(args: argparse.Namespace) -> Any:
    from ..compare import DEFAULT_THRESHOLDS

    fields = DEFAULT_THRESHOLDS.as_dict()
    for key in fields:
        value = getattr(args, key, None)
        if value is not None:
            fields[key] = None if value == OFF else value
    return fields


def _stats_thresholds(args: argparse.Namespace) -> Any:
    fields = dict(STATS_HELP_DEFAULTS)
    for key in STATS_HELP_DEFAULTS:
        value = getattr(args, "stats_" + key, None)
        if value is not None:
            fields[key] = None if value == OFF else value
    fields["check_scalars"] = bool(getattr(args, "check_scalars", None))
    return fields


class _Progress(object):
    """``done/total dump files`` on stderr when it is a terminal, at most 10 redraws a second."""

    def __init__(self) -> None:
        err = sys.stderr
        self.stream = err if err is not None and hasattr(err, "isatty") and err.isatty() else None
        self.last = 0.0
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        if self.stream is None:
            return
        now = time.monotonic()
        if now - self.last < 0.1 and done != total:
            return
        self.last = now
        self.drawn = True
        self.stream.write("\rcomparing {}/{} dump files".format(done, total))
        self.stream.flush()

    def close(self) -> None:
        if self.stream is not None and self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def _write(option: str, path: str, make: Callable[[], str]) -> None:
    from .._atomic import atomic_write_bytes  # here, as the imports of run(): `run`'s parser need not load them
    from .._inert import utf8  # here: building the parser loads no numpy

    try:
        atomic_write_bytes(path, utf8(make()))
    except OSError as exc:
        raise CliError("compare: --{} {}: {}".format(option, path, exc.strerror or exc))


def _compare(args: argparse.Namespace, progress: Any) -> Any:
    """The result of the comparison asked for: one NPU side, a rank index, or a merge of rank documents."""
    from ..compare import compare, compare_ranks, is_rank_index, load_rank_doc, merge_rank_docs

    if args.merge:
        return merge_rank_docs([load_rank_doc(path) for path in args.merge], args.merge)
    kwargs = dict(graph=args.graph, thresholds=_thresholds(args), ops=args.ops, step=args.step, workers=args.workers,
                  progress=progress, allow_uncompared=args.allow_uncompared,
                  stats_thresholds=_stats_thresholds(args), determinism=args.determinism,
                  replay=args.replay, replay_op=args.replay_op, suspects=_suspects_count(args))
    if is_rank_index(args.npu):
        return compare_ranks(args.npu, args.golden, **kwargs)
    return compare(args.npu, args.golden, **kwargs)


def _suspects_count(args: argparse.Namespace) -> Any:
    if not args.suspects_out:
        return None
    from ..compare.suspects import DEFAULT_SUSPECTS

    return args.suspects if args.suspects is not None else DEFAULT_SUSPECTS


def _write_suspects(path: str, doc: Any, quiet: bool) -> None:
    """The suspects file (none when nothing is suspect); one line on stderr saying which, unless -q."""
    from ..suspects import write_suspects

    if doc is None:
        if not quiet:
            say("suspects: none (nothing breached, no NaN/Inf, no overflow): {} not written".format(path),
                file=sys.stderr)
        return
    try:
        write_suspects(path, doc)
    except OSError as exc:
        raise CliError("compare: --suspects-out {}: {}".format(path, exc.strerror or exc))
    if not quiet:
        say("suspects: {} op(s) written to {} (dump_layer for run --dump-layer-from)".format(len(doc["ops"]), path),
            file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    # Imported here, not at the top: every command's parser imports this module for its arguments
    # (npu-dump-hook run's own process included), and only a comparison needs these.
    import json

    from .._signals import terminating_cleanly

    _check_paths(args)
    progress = _Progress()
    try:
        with terminating_cleanly():  # the extracted archive's temp folder and the workers go on SIGTERM too
            result = _compare(args, progress)
    finally:
        progress.close()
    if args.csv:
        _write("csv", args.csv, result.csv)
    if args.json:
        _write("json", args.json, lambda: json.dumps(result.doc, indent=1, allow_nan=False) + "\n")
    if args.html:
        from ..compare import render_html

        _write("html", args.html, result.html if hasattr(result, "html") else lambda: render_html(result.doc))
    if args.suspects_out:
        _write_suspects(args.suspects_out, result.doc.get("suspects"), bool(getattr(args, "quiet", False)))
    pending(args, result.exit_code)
    say(result.summary_text(args.top))
    return result.exit_code
