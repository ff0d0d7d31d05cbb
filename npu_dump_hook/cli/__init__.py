"""The ``npu-dump-hook`` command (also ``python -m npu_dump_hook``).

A thin layer over the library: this package only parses arguments, dispatches to a
``run(args) -> int`` function in one of its private modules (imported lazily, so ``--help``
never loads TensorFlow or numpy) and maps errors to the exit codes of :mod:`._exit`:

    0  ok
    1  a check failed (verify found problems, parse met a malformed file, ...)
    2  usage error (bad arguments or option values)
    3  anything else (one line on stderr; the traceback only with --debug)
"""
import argparse
import importlib
import logging
import sys
from typing import List, Optional

from .._version import __version__
from ..constants import ARCHIVES, BACKEND_CHOICES, CHECKSUMS, LINK_MODES
from ..errors import NpuDumpError, OptionError
from ._exit import EXIT_CHECK_FAILED, EXIT_ERROR, EXIT_OK, EXIT_USAGE

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_CHECK_FAILED", "EXIT_USAGE", "EXIT_ERROR"]

# command -> module (relative to this package) holding ``run(args) -> int``
_HANDLERS = {
    "collect": "._bundle",
    "verify": "._bundle",
    "inspect": "._bundle",
    "parse": "._parse",
    "demo": "._demo",
}


def _add_collect(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("collect", help="bundle the graph and dump folder of a run made without the hook")
    p.add_argument("--dump-path", required=True, help="the dump_path the run used")
    p.add_argument("--graph-dir", required=True, help="folder holding ge_proto_*_Build.txt (DUMP_GRAPH_PATH or the run's cwd)")
    p.add_argument("--out", required=True, help="bundle destination (directory, or .tar / .tar.gz with --archive)")
    p.add_argument("--since", help="ignore older runs: ISO 8601 local time, epoch seconds or YYYYMMDDHHMMSS")
    p.add_argument("--device-id", type=int, help="device folder to collect (default: every device found)")
    p.add_argument("--graph-keyword", help="op name that only the training graph contains")
    p.add_argument("--link", choices=LINK_MODES, default="auto")
    p.add_argument("--checksum", choices=CHECKSUMS, default="sha256")
    p.add_argument("--archive", choices=ARCHIVES, help="also pack the bundle into an archive")
    p.add_argument("--force", action="store_true", help="replace an existing non-empty destination")


def _add_verify(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("verify", help="check a bundle (directory or archive) and list every problem")
    p.add_argument("bundle")


def _add_inspect(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("inspect", help="summarise a bundle")
    p.add_argument("bundle")
    p.add_argument("--json", action="store_true", help="print bundle.json plus the verification result")


def _add_parse(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("parse", help="show what dump files, stats CSVs, Opdebug files, mapping.csv and graphs hold")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--json", action="store_true", help="one JSON document instead of text")
    p.add_argument("--to-npy", metavar="DIR", help="write every tensor, in its original shape, as .npy into DIR")


def _add_demo(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("demo", help="train a bundled sample model one step with the hook and write a bundle")
    p.add_argument("--out", default="demo_out", help="output folder (default: ./demo_out)")
    p.add_argument("--model", choices=("cnn", "mlp", "text"), default="cnn")
    p.add_argument("--backend", choices=BACKEND_CHOICES, default="auto")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="npu-dump-hook",
        description="Prepare Ascend NPU dump data and GE graph files for accuracy comparison.",
    )
    parser.add_argument("--version", action="version", version="%(prog)s " + __version__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in (_add_collect, _add_verify, _add_inspect, _add_parse, _add_demo):
        add(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    if not args.command:
        parser.print_usage(sys.stderr)
        return EXIT_USAGE
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        handler = importlib.import_module(_HANDLERS[args.command], __package__)
        return int(handler.run(args))
    except OptionError as exc:
        return _fail(args, exc, EXIT_USAGE)
    except (NpuDumpError, OSError) as exc:
        return _fail(args, exc, EXIT_ERROR)
    except KeyboardInterrupt:
        return _fail(args, "interrupted", EXIT_ERROR)
    except Exception as exc:  # noqa: BLE001 - the contract is one line, not a traceback
        return _fail(args, exc, EXIT_ERROR)


def _fail(args: argparse.Namespace, exc: object, code: int) -> int:
    if args.debug and isinstance(exc, BaseException):
        import traceback

        traceback.print_exception(type(exc), exc, exc.__traceback__)
    name = type(exc).__name__ if isinstance(exc, BaseException) else "error"
    print("npu-dump-hook: {}: {}".format(name, exc), file=sys.stderr)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
