"""``collect``, ``verify`` and ``inspect``: argument handling and printing over the library."""
import argparse
import json
import sys
from typing import Any, List

from .. import bundle
from ..bundle import Problem
from ..collect import collect_post_hoc
from ..errors import UnsafePathError
from ._exit import EXIT_CHECK_FAILED, EXIT_OK, EXIT_USAGE
from ._since import parse_since

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Dispatch on ``args.command`` (one of collect, verify, inspect)."""
    handler = {"collect": _collect, "verify": _verify, "inspect": _inspect}.get(args.command)
    if handler is None:
        print("npu-dump-hook: unknown bundle command {!r}".format(args.command), file=sys.stderr)
        return EXIT_USAGE
    return handler(args)


def _collect(args: argparse.Namespace) -> int:
    since = parse_since(args.since) if args.since else None
    result = collect_post_hoc(args.dump_path, args.graph_dir, args.out, since=since, device_id=args.device_id,
                              graph_keyword=args.graph_keyword, link=args.link, checksum=args.checksum,
                              archive=args.archive, force=args.force)
    cov = result.coverage
    print("bundle {}: {} files, {} bytes ({} linked, {} copied), steps {}, coverage {}/{}".format(
        result.location, result.files, result.bytes, result.linked, result.copied,
        ",".join(result.steps) or "-", cov.get("dumped"), cov.get("expected")))
    if result.archive and result.path:
        print("archive {}".format(result.archive))
    for warning in result.warnings:
        print("warning: {}".format(warning), file=sys.stderr)
    return EXIT_OK


def _problems(path: str) -> List[Any]:
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
