"""``collect``, ``verify`` and ``inspect`` commands (DESIGN §4): argument handling and printing.

Exit codes: 0 ok; 1 ``verify`` (or ``inspect``) found problems; 2 usage; 3 anything else
(raised errors are mapped by :mod:`npu_dump_hook.cli`).
"""
import argparse
import json
import sys
from typing import Any, Dict, List

from .errors import UnsafePathError

__all__ = ["run"]

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2


def run(args: argparse.Namespace) -> int:
    """Dispatch on ``args.command`` (one of collect, verify, inspect)."""
    handler = {"collect": _collect, "verify": _verify, "inspect": _inspect}.get(args.command)
    if handler is None:
        print("npu-dump-hook: unknown bundle command {!r}".format(args.command), file=sys.stderr)
        return EXIT_USAGE
    return handler(args)


def _collect(args: argparse.Namespace) -> int:
    from . import bundle, locate

    since = locate.parse_since(args.since) if args.since else None
    located = locate.locate_run(args.dump_path, graph_dirs=[args.graph_dir], since=since,
                                device_id=args.device_id, graph_keyword=args.graph_keyword)
    result = bundle.write_bundle(
        args.out, located, backend=_backend_of(located.graph_file), options={}, run=_post_hoc_run(located), randomness=None,
        link=args.link, checksum=args.checksum, archive=args.archive, force=args.force)
    cov = result.coverage
    print("bundle {}: {} files, {} bytes ({} linked, {} copied), steps {}, coverage {}/{}".format(
        result.location, result.files, result.bytes, result.linked, result.copied,
        ",".join(result.steps) or "-", cov.get("dumped"), cov.get("expected")))
    if result.archive and result.path:
        print("archive {}".format(result.archive))
    for warning in result.warnings:
        print("warning: {}".format(warning), file=sys.stderr)
    return EXIT_OK


def _post_hoc_run(located: Any) -> Dict[str, Any]:
    """What a post-hoc collection knows about the run: the dumped steps and devices."""
    steps = sorted({s.step for s in located.steps}, key=lambda s: (len(s), s))
    devices = sorted({s.device_id for s in located.steps})
    return {"steps": len(steps), "global_step": int(steps[-1]) if steps else None, "started": None,
            "ended": None, "rank": None, "device_id": devices[0] if len(devices) == 1 else devices}


def _problems(path: str) -> List[Any]:
    from . import bundle
    from ._bagit import Problem

    try:
        return bundle.verify_bundle(path)
    except UnsafePathError as exc:  # a hostile archive is a failed check, not a crash
        return [Problem("unsafe", "", str(exc))]


def _verify(args: argparse.Namespace) -> int:
    problems = _problems(args.bundle)
    for problem in problems:
        print(str(problem))
    if problems:
        print("{}: {} problem(s)".format(args.bundle, len(problems)), file=sys.stderr)
        return EXIT_CHECK_FAILED
    print("{}: ok".format(args.bundle))
    return EXIT_OK


def _inspect(args: argparse.Namespace) -> int:
    from . import bundle

    doc = bundle.read_bundle(args.bundle)
    problems = _problems(args.bundle)
    if args.json:
        out = dict(doc)
        out["verification"] = {"ok": not problems, "problems": [
            {"kind": p.kind, "path": p.path, "detail": p.detail} for p in problems]}
        print(json.dumps(out, indent=1))
    else:
        print(bundle.summarize(doc))
        print("verify    {}".format("ok" if not problems else "{} problem(s)".format(len(problems))))
        for problem in problems:
            print("  " + str(problem))
    return EXIT_OK if not problems else EXIT_CHECK_FAILED


def _backend_of(graph_file: str) -> str:
    """``emulated`` for graphs the emulated NPU wrote, so such data is never labelled NPU data."""
    from .emulator.ge_model import is_emulated_graph

    return "emulated" if is_emulated_graph(graph_file) else "npu"
