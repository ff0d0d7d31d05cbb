"""The ``npu-dump-hook`` command (also ``python -m npu_dump_hook``).

A thin layer over the library: this package only parses arguments, dispatches to a
``run(args) -> int`` function in one of its private modules (imported lazily, so ``--help``
never loads TensorFlow or numpy) and maps errors to the exit codes of :mod:`._exit`:

    0  ok
    1  a check failed: verify/inspect found problems, or were given something that exists but
       is not a bundle (a folder without data/bundle.json, a file that is no tar archive);
       parse met a malformed file, a file whose name is no dump artefact, or a folder without any
    2  usage: bad arguments or option values, or a path given on the command line that does
       not exist (checked before any work is done)
    3  anything else (the run to collect was not found, the destination exists, I/O errors)

``run`` exits with the status of the script it ran (2 before it starts, for bad options).

Conventions every command follows:

* ``-q/--quiet`` (only errors on stderr), ``-v/--verbose`` (INFO logs), ``--debug`` (DEBUG
  logs and tracebacks), before or after the command name; the default shows warnings.
  ``-q`` together with ``-v`` or ``--debug`` is a usage error.
* An error is one line on stderr, ``npu-dump-hook: <message>``, naming the option or the
  path as typed; the traceback only with ``--debug``. Usage errors name the command too.
* Output is inert: control characters and lone surrogates in what is printed (names and paths
  from bundles, dump trees, graphs; warnings; errors) are visible escapes (:mod:`._output`).
* A warning is printed once, as ``npu-dump-hook: warning: <message>``: the library's log
  records and the CLI's own warnings share one handler that drops repeats.
* stdout carries the result only. When its reader goes away early (``... | head``) the
  command stops quietly and exits with the code it had determined so far (0 if none).
"""
import argparse
import importlib
import logging
import os
import sys
from typing import Any, List, Optional

from .._version import __version__
from .. import settings
from .._cli_conventions import PROG, LogFormatter, level_name
from ..constants import ARCHIVES, BACKEND_CHOICES, CHECKSUMS, LINK_MODES
from ..errors import NpuDumpError, OptionError
from ._exit import EXIT_CHECK_FAILED, EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from ._output import inert_lines, say

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_CHECK_FAILED", "EXIT_USAGE", "EXIT_ERROR"]

# command -> module (relative to this package) holding ``run(args) -> int``
_HANDLERS = {
    "collect": "._bundle",
    "verify": "._bundle",
    "inspect": "._bundle",
    "parse": "._parse",
    "demo": "._demo",
    "run": "._run",
    "compare": "._compare",
}

_LOGGER = "npu_dump_hook"


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (raised, so ``main`` picks the exit code)."""

    def error(self, message: str) -> "Any":  # type: ignore[override]
        command = self.prog[len(PROG):].strip()
        raise CliError("{}{} (see {} --help)".format(command + ": " if command else "", message, self.prog),
                       EXIT_USAGE)


def _add_common(parser: argparse.ArgumentParser, top: bool) -> None:
    """-q/-v/--debug; on subcommands their default is SUPPRESS, so a value given before
    the command name is not reset by the subcommand's defaults."""
    default = False if top else argparse.SUPPRESS
    group = parser.add_argument_group("output options")
    group.add_argument("-q", "--quiet", action="store_true", default=default,
                       help="print only errors on stderr (no warnings or logs)")
    group.add_argument("-v", "--verbose", action="store_true", default=default,
                       help="also print INFO logs (default: warnings only)")
    group.add_argument("--debug", action="store_true", default=default,
                       help="print DEBUG logs and the traceback of an error")


def _sub(sub: "argparse._SubParsersAction", name: str, summary: str, description: str,
         examples: str) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=summary, description=description,
                            epilog="examples:\n" + examples.strip("\n"),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser


def _add_collect(sub: "argparse._SubParsersAction") -> argparse.ArgumentParser:
    p = _sub(sub, "collect", "bundle the graph and dump folder of a run made without the hook", """\
Bundle a run made without the hook: the training Build graph (ge_proto_*_Build.txt) found
under --graph-dir and the dump folders {time}/{device_id}/{model_name}/{model_id}/{step}
under --dump-path that belong to it. Without --since the newest run wins, with a warning.
An --out ending in .tar or .tar.gz (.tgz) writes only that archive.""", """
  npu-dump-hook collect --dump-path /home/output --graph-dir . --out bundle --since 2026-11-29T07:30:00
  npu-dump-hook collect --dump-path /home/output --graph-dir . --out bundle.tar.gz
  npu-dump-hook collect --dump-path dump --graph-dir graphs --out bundle --archive tar --force
""")
    p.add_argument("--dump-path", required=True, help="the dump_path the run used (a folder)")
    p.add_argument("--graph-dir", required=True, help="folder holding ge_proto_*_Build.txt (DUMP_GRAPH_PATH or the run's cwd)")
    p.add_argument("--out", required=True,
                   help="bundle destination: a folder, or a .tar / .tar.gz file (implies --archive)")
    p.add_argument("--since", help="ignore older runs: ISO 8601 local time, epoch seconds or YYYYMMDDHHMMSS")
    p.add_argument("--device-id", type=int, help="device folder to collect (default: every device found)")
    p.add_argument("--graph-keyword", help="op name that only the training graph contains")
    p.add_argument("--link", choices=LINK_MODES, default="auto",
                   help="hard-link source files into the bundle or copy them (default: auto)")
    p.add_argument("--checksum", choices=CHECKSUMS, default="sha256",
                   help="record sha256 per file in bundle.json (default: sha256)")
    p.add_argument("--archive", choices=ARCHIVES,
                   help="also pack the bundle folder into OUT.tar[.gz] (implied by an --out ending so)")
    p.add_argument("--force", action="store_true", help="replace an existing non-empty destination")
    return p


def _add_verify(sub: "argparse._SubParsersAction") -> argparse.ArgumentParser:
    p = _sub(sub, "verify", "check a bundle (directory or archive) and list every problem", """\
Check a bundle folder or .tar/.tar.gz archive: the BagIt manifests, bundle.json against the
format, the payload against bundle.json, and that dump, mapping and graph files parse. Every
problem is printed on stdout as "kind: path: detail"; exit 1 when there is any.""", """
  npu-dump-hook verify bundle
  npu-dump-hook verify -q bundle.tar.gz && echo intact
""")
    p.add_argument("bundle", metavar="BUNDLE", help="bundle folder or .tar / .tar.gz archive")
    return p


def _add_inspect(sub: "argparse._SubParsersAction") -> argparse.ArgumentParser:
    p = _sub(sub, "inspect", "summarise a bundle", """\
Summarise a bundle: schema, backend, the graph and why it was chosen, the dump chain, the
run, randomness handling, golden files, coverage, warnings, and the verification result.
Exit 1 when verification finds problems (with or without --json).""", """
  npu-dump-hook inspect bundle
  npu-dump-hook inspect bundle.tar.gz --json > bundle-report.json
""")
    p.add_argument("bundle", metavar="BUNDLE", help="bundle folder or .tar / .tar.gz archive")
    p.add_argument("--json", action="store_true", help="print bundle.json plus the verification result")
    return p


def _add_parse(sub: "argparse._SubParsersAction") -> argparse.ArgumentParser:
    p = _sub(sub, "parse", "show what dump files, stats CSVs, Opdebug files, mapping.csv and graphs hold", """\
Show what dump artefacts hold: dump files (header, tensors, min/max/mean), stats CSVs,
Opdebug overflow files, mapping.csv and ge_proto_*.txt graphs. Files are recognised by
name; folders are walked. A file whose name is no dump artefact, a folder holding none,
or a malformed file is one line on stderr and exit 1; the other paths are still shown.""", """
  npu-dump-hook parse /home/output/20261129073000/0/ge_default_20261129073000_1/1/0
  npu-dump-hook parse Conv2D.conv1_Conv2D.3.2.1700000000000001 --to-npy npy/
  npu-dump-hook parse dump/ graphs/ --json > artefacts.json
""")
    p.add_argument("paths", nargs="+", metavar="PATH", help="dump artefact file or folder")
    p.add_argument("--json", action="store_true", help="one JSON document instead of text")
    p.add_argument("--to-npy", metavar="DIR", help="write every tensor, in its original shape, as .npy into DIR")
    return p


def _add_demo(sub: "argparse._SubParsersAction") -> argparse.ArgumentParser:
    p = _sub(sub, "demo", "train a bundled sample model one step with the hook and write a bundle", """\
Train a bundled sample model for one step with the hook (on the emulated NPU when no NPU
is present) and write its bundle: a quick look at what the hook produces.

--compare, the second act: the emulated NPU run with the realistic profile (float16 Cube
ops, GE fusion, device formats) and one injected kernel fault (cnn: conv2/Conv2D=scale=1.05,
mlp: hidden2/MatMul, text: logits/MatMul), then the golden run in a second process (backend
golden, initial state from the NPU bundle: what --golden-for runs), then the comparison of
the two bundles: its summary, OUT/compare.html and the command that repeats it. Exit 1 when
the first divergence is not the faulted op.""", """
  npu-dump-hook demo
  npu-dump-hook demo --model mlp --out /tmp/demo
  npu-dump-hook demo --compare
  npu-dump-hook demo --compare --model mlp --fault hidden1/MatMul=nan
  npu-dump-hook demo --golden-for demo_out/npu/bundles/BUNDLE --out golden   # the golden run alone
""")
    p.add_argument("--out", default="demo_out", help="output folder (default: ./demo_out)")
    p.add_argument("--model", choices=("cnn", "mlp", "text"), default="cnn")
    p.add_argument("--backend", choices=BACKEND_CHOICES, default="auto")
    p.add_argument("--compare", action="store_true",
                   help="second act: faulted emulated NPU run, golden run in a second process, comparison")
    p.add_argument("--fault", dest="faults", action="append", metavar="OP=SPEC",
                   help="with --compare: the fault to inject instead of the model's default (repeatable)")
    p.add_argument("--golden-for", dest="initial_state", metavar="NPU_BUNDLE",
                   help="train the model in the golden run of NPU_BUNDLE (the second process of --compare)")
    return p


def _add_run(sub: "argparse._SubParsersAction") -> argparse.ArgumentParser:
    from ..options import DUMP_DATA_KINDS, DUMP_DEBUG_MODES, DUMP_MODES

    p = _sub(sub, "run", "run an unmodified training script with the hook injected", """\
Run a training script as it is, with one NpuDumpHook injected into its Python process: the
first of Estimator.train, MonitoredSession/MonitoredTrainingSession or a tf.compat.v1.Session
the script trains with (Keras fit/train_on_batch in graph mode too) gets it (a plain session
ends the script with status 0 after the dumped step). The exit status is the script's, or 4
when it ended with 0 but without a bundle (--allow-no-bundle keeps 0); when a bundle was
written its path is the last line on stdout. Put the script after --; "python" there is the interpreter to use:
a bare python, python3 or python3.X of this one's version is this interpreter (the venv
npu-dump-hook runs in, activated or not), a path runs that file, another bare name
(python2, pypy3) is looked up on PATH; default: this one. The options become NPU_DUMP_* and NPU_DUMP_HOOK_* variables of the
script's process (python -m npu_dump_hook.runner reads the same).""", """
  npu-dump-hook run -- python train.py --epochs 10
  npu-dump-hook run --dump-mode all --dump-step 0 --output-dir out -- python train.py
  npu-dump-hook run --dump-debug --no-strict -- train.py --data /data
  npu-dump-hook run --backend emulated --emulate-profile ascend --fault conv2/Conv2D=scale=1.05 -- train.py
  npu-dump-hook run --golden-for npu_dump_hook_out/bundles/BUNDLE -- python train.py   # on the CPU/GPU machine
  npu-dump-hook run --dump-layer-from suspects.json -- python train.py   # dump only compare --suspects-out's ops
  npu-dump-hook run --two-phase --suspects 3 --overflow-first -- python train.py   # large models, one machine
""")
    p.usage = "{} run [options] -- [python [PYTHON_OPTIONS]] SCRIPT|-m MODULE [ARGS...]".format(PROG)
    dump = p.add_argument_group("dump options (NPU_DUMP_*; default: a data dump of the outputs into the run folder)")
    dump.add_argument("--dump-path", help="folder the dump is written to")
    dump.add_argument("--dump-step", help="steps to dump, GE syntax such as 0|5|10-20 (default 0)")
    dump.add_argument("--dump-mode", choices=DUMP_MODES, help="dump op inputs, outputs or all")
    dump.add_argument("--dump-layer", help="space-separated op names to dump (default: every op)")
    dump.add_argument("--dump-data", choices=DUMP_DATA_KINDS, help="tensors, or stats only")
    dump.add_argument("--dump-debug", action="store_true", default=None,
                      help="collect overflow data (Opdebug) instead of a data dump")
    dump.add_argument("--dump-debug-mode", choices=DUMP_DEBUG_MODES, help="overflow kind (implies --dump-debug)")
    _add_setting_flags(p.add_argument_group("hook options (NPU_DUMP_HOOK_*)"))
    _add_two_phase(p.add_argument_group("large models: statistics first, then a targeted dump (README)"))
    _add_flag_aliases(p.add_argument_group("aliases (older spellings, same behaviour)"))
    p.add_argument("target", nargs="*", metavar="COMMAND",
                   help="after --: [python [PYTHON_OPTIONS]] SCRIPT [ARGS...] or [python] -m MODULE [ARGS...]")
    return p


def _add_two_phase(group: "argparse._ArgumentGroup") -> None:
    group.add_argument("--two-phase", action="store_true",
                       help="stats run, its golden run, suspect selection, a run dumping only the suspects "
                            "(dump_layer), its golden run, the tensor compare; exit status as compare's")
    group.add_argument("--suspects", metavar="N", type=int, default=None,
                       help="with --two-phase: at most N primary suspects, each with its producers (default 5)")
    group.add_argument("--overflow-first", action="store_true",
                       help="with --two-phase: an overflow run (--dump-debug) first; its overflow ops are suspects")


def _add_setting_flags(group: "argparse._ArgumentGroup") -> None:
    """The flags of every settings-table row that has one (:mod:`npu_dump_hook.settings`), in table order."""
    for row in settings.SETTINGS.values():
        if row.flag:
            extra = dict(row.cli)
            if row.list_choices:
                extra["choices"] = row.choices()
            group.add_argument(row.flag, dest=row.name, help=row.help, **extra)
        if row.negative:
            default = {} if row.flag else {"default": None}
            group.add_argument(row.negative, dest=row.name, action="store_false", help=row.negative_help, **default)


def _add_flag_aliases(group: "argparse._ArgumentGroup") -> None:
    """Each older flag of a settings-table row (its ``flag_aliases``): the argument of the flag it
    stands for, under the older name (same keyword, same value)."""
    for row in settings.SETTINGS.values():
        for alias, flag in row.flag_aliases.items():
            same = "same as " + flag
            if flag == row.negative:
                group.add_argument(alias, dest=row.name, action="store_false", default=None, help=same)
                continue
            extra = dict(row.cli)
            if row.list_choices:
                extra["choices"] = row.choices()
            group.add_argument(alias, dest=row.name, help=same, **extra)


def _add_compare(sub: "argparse._SubParsersAction") -> argparse.ArgumentParser:
    from ._compare import add_arguments

    p = _sub(sub, "compare", "compare an NPU dump with its golden tensors: first divergence, msaccucmp's metrics", """\
Compare every dumped NPU tensor with its golden (CPU/GPU) tensor, matched as msaccucmp
matches them (graph origin attrs, fused nodes, device formats converted), and name the first
diverging original TF op: the earliest op whose output breaches a threshold while its inputs
are within them. Later breaches it causes are "propagated". Exit 1 when there is such a
root cause or the two runs did not see the same input (docs/compare.md).""", """
  npu-dump-hook compare bundle
  npu-dump-hook compare npu_bundle.tar.gz golden_bundle --csv result.csv --html report.html
  npu-dump-hook compare dump/20261201/0/ge_default_1/1/0 golden_npy/ --graph ge_proto_00000001_Build.txt
""")
    add_arguments(p)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Prepare Ascend NPU dump data and GE graph files for accuracy comparison.",
        epilog="exit codes: 0 ok, 1 a check failed, 2 usage error or a path that does not exist, "
               "3 anything else\nexamples:\n  npu-dump-hook verify bundle\n  npu-dump-hook inspect --help",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version="%(prog)s " + __version__)
    _add_common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in (_add_collect, _add_verify, _add_inspect, _add_parse, _add_demo, _add_run, _add_compare):
        _add_common(add(sub), top=False)
    return parser


# --------------------------------------------------------------------------- logging


class _OnceFilter(logging.Filter):
    """Drop a warning whose text was already printed (library log + CLI line = once)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = set()  # type: set

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        text = record.getMessage()
        if text in self.seen:
            return False
        self.seen.add(text)
        return True


class _StderrHandler(logging.StreamHandler):
    """Writes to the *current* sys.stderr (tests replace it), every line inert (:mod:`._output`:
    library warnings name files and ops from untrusted trees)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def format(self, record: logging.LogRecord) -> str:
        return inert_lines(super().format(record))

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


class _Logging(object):
    """The ``npu_dump_hook`` logger routed to one stderr handler for one ``main`` call."""

    def __init__(self, level: int) -> None:
        self.logger = logging.getLogger(_LOGGER)
        self.level = level

    def __enter__(self) -> "_Logging":
        self.saved = (self.logger.level, self.logger.propagate)
        self.handler = _StderrHandler()
        self.handler.setFormatter(LogFormatter(names=self.level <= logging.DEBUG))
        self.handler.addFilter(_OnceFilter())
        self.logger.addHandler(self.handler)
        self.logger.setLevel(self.level)
        self.logger.propagate = False  # printed here once, not again by a root handler
        return self

    def __exit__(self, *exc: Any) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.saved[0])
        self.logger.propagate = self.saved[1]


def _level(args: argparse.Namespace) -> int:
    return getattr(logging, level_name(getattr(args, "debug", False), getattr(args, "verbose", False),
                                       getattr(args, "quiet", False)))


def warn(message: str) -> None:
    """A CLI warning: one line on stderr unless -q; a repeat of a library warning is dropped."""
    logging.getLogger(_LOGGER + ".cli").warning("%s", message)


# --------------------------------------------------------------------------- main


def main(argv: Optional[List[str]] = None) -> int:
    """Run ``npu-dump-hook`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    args = argparse.Namespace(debug=False)
    try:
        try:
            code = _main(argv, args)
        finally:
            sys.stdout.flush()
        return code
    except BrokenPipeError:  # the reader of stdout went away (| head): stop quietly
        _stdout_to_devnull()
        return int(getattr(args, "pending_exit", EXIT_OK))


def _main(argv: Optional[List[str]], holder: argparse.Namespace) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except CliError as exc:
        return _fail(holder, exc, exc.code)
    except SystemExit as exc:  # --help / --version
        return int(exc.code or 0)
    holder.__dict__.update(vars(args))
    args = holder  # BrokenPipe handling in main() reads pending_exit from this object
    if not args.command:
        return _fail(args, CliError("a command is required: {} (see {} --help)".format(
            ", ".join(_HANDLERS), PROG), EXIT_USAGE), EXIT_USAGE)
    if args.quiet and (args.verbose or args.debug):
        other = "--debug" if args.debug else "-v/--verbose"
        return _fail(args, CliError("{}: -q/--quiet contradicts {}".format(args.command, other), EXIT_USAGE),
                     EXIT_USAGE)
    with _Logging(_level(args)):
        try:
            handler = importlib.import_module(_HANDLERS[args.command], __package__)
            return int(handler.run(args))
        except BrokenPipeError:
            raise
        except CliError as exc:
            return _fail(args, exc, exc.code)
        except NpuDumpError as exc:
            return _fail(args, exc, EXIT_USAGE if isinstance(exc, OptionError) else EXIT_ERROR)
        except OSError as exc:
            return _fail(args, exc, EXIT_ERROR)
        except KeyboardInterrupt as exc:
            return _fail(args, exc, EXIT_ERROR)
        except Exception as exc:  # noqa: BLE001 - the contract is one line, not a traceback
            return _fail(args, exc, EXIT_ERROR)


def _message(exc: BaseException) -> str:
    if isinstance(exc, (CliError, NpuDumpError)):
        return str(exc)
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc)
        if exc.filename is not None:
            return "{}: {}".format(exc.filename, reason)
        return reason
    return "internal error: {}: {} (--debug shows the traceback)".format(type(exc).__name__, exc)


def _fail(args: argparse.Namespace, exc: BaseException, code: int) -> int:
    # --debug: the traceback, except for errors the CLI itself detected (bad arguments,
    # missing paths), whose stack says nothing the message does not
    if getattr(args, "debug", False) and not (isinstance(exc, CliError) and exc.__cause__ is None):
        import traceback

        sys.stderr.write(inert_lines("".join(traceback.format_exception(type(exc), exc, exc.__traceback__))))
    text = " ".join(_message(exc).split("\n"))
    say("{}: {}".format(PROG, text), file=sys.stderr)
    return code


def _stdout_to_devnull() -> None:
    """Point fd 1 at /dev/null so the interpreter's last flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):  # in-process with a stdout that has no fd
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
