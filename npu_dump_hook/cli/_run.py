"""``npu-dump-hook run``: run an unmodified training script with the hook injected.

The options become the environment of the script's process -- ``NPU_DUMP_*`` for the dump,
``NPU_DUMP_HOOK_*`` for the hook (:mod:`npu_dump_hook.constants`) -- and are checked here,
before anything starts (exit 2, one line naming the option). The script then runs in a child
interpreter under :func:`npu_dump_hook.runner.bootstrap_command`, with this process's stdin,
stdout and stderr; the child prints the bundle path as its last line. The exit status is the
script's (killed by signal N: 128+N), except that an option only the graph can refute (a
``--fault`` naming no op of it) is found at the session's first run and reported by the child
as here: one line naming the flag, exit 2, no traceback. Ctrl-C reaches the script directly (same process
group); a SIGTERM sent to this process is passed on to it.

What follows ``--``: ``[python [PYTHON_OPTIONS]] SCRIPT [ARGS...]`` or ``[python] -m MODULE
[ARGS...]``. A first word named ``python*``/``pypy*`` is the interpreter (:func:`interpreter`):
a bare ``python``, ``python3`` or ``python3.X`` of this interpreter's version is this
interpreter (``sys.executable``: the venv ``npu-dump-hook`` is installed in, activated or not),
a path runs that file, any other bare name is looked up on PATH. Without one, this interpreter
runs the script.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
from typing import Any, Dict, List, Sequence, Tuple

from .. import settings
from .._cli_conventions import level_name
from ..constants import DUMP_OPTION_FLAGS, ENV_OPTIONS, ENV_RUN, ENV_RUN_FLAGS, ENV_RUN_LOG_LEVEL, FAULTS_SEPARATOR
from ..errors import OptionError
from ..runner import NoticeChannel, RunSettings, bootstrap_command, parse_faults
from ._exit import EXIT_USAGE, CliError

__all__ = ["run", "split_command", "interpreter", "faults_from_flags"]

_INTERPRETER = re.compile(r"^(?:python|pypy)[0-9.]*[a-z]?(?:\.exe)?$")
_PYTHON_FLAGS = set("bBdEiIOPqRsSuvx")  # interpreter options without a value
_WITH_VALUE = ("W", "X")
# dump option (DumpOptions field) -> its flag; the fields name the variables in ENV_OPTIONS
_DUMP_FLAGS = tuple(DUMP_OPTION_FLAGS.items())
_NO_SCRIPT = "give the script to run after -- (e.g. npu-dump-hook run -- python train.py)"


def run(args: argparse.Namespace) -> int:
    python, python_options, target = split_command(args.target)
    faults_from_flags(getattr(args, "faults", None))
    _check_two_phase(args)
    env, flags = _environment(args)
    try:
        RunSettings.from_env(env)
    except OptionError as exc:
        raise CliError("option {}={!r}: {}".format(flags.get(exc.option, exc.option), exc.value, exc.rule),
                       EXIT_USAGE) from None
    if getattr(args, "two_phase", False):
        return _two_phase(args, env)
    return _run_child(bootstrap_command(python, python_options, target), env)


_NOT_WITH_TWO_PHASE = (("dump_data", "--dump-data"), ("dump_layer", "--dump-layer"),
                       ("dump_layer_from", "--dump-layer-from"), ("dump_debug", "--dump-debug"),
                       ("dump_debug_mode", "--dump-debug-mode"), ("initial_state", "--golden-for"))


def _check_two_phase(args: argparse.Namespace) -> None:
    """--two-phase chooses each pass's dump itself; --suspects/--overflow-first belong to it."""
    if not getattr(args, "two_phase", False):
        for flag, given in (("--suspects", getattr(args, "suspects", None) is not None),
                            ("--overflow-first", getattr(args, "overflow_first", False))):
            if given:
                raise CliError("run: {} needs --two-phase".format(flag), EXIT_USAGE)
        return
    for field, flag in _NOT_WITH_TWO_PHASE:
        if getattr(args, field, None) not in (None, False):
            raise CliError("run: --two-phase chooses the dump of each pass itself: {} does not go with it".format(
                flag), EXIT_USAGE)
    if args.suspects is not None and args.suspects < 1:
        raise CliError("option --suspects={!r}: must be at least 1".format(args.suspects), EXIT_USAGE)


def _two_phase(args: argparse.Namespace, env: Dict[str, str]) -> int:
    """The passes of :mod:`npu_dump_hook.two_phase`, in the folder OUTPUT_DIR/two_phase_{time}."""
    import time

    from ..two_phase import run_two_phase
    from ._output import say

    for var in (ENV_RUN, ENV_RUN_LOG_LEVEL):  # each pass's own run command sets them again
        env.pop(var, None)
    base = getattr(args, "output_dir", None) or "npu_dump_hook_out"
    out = os.path.abspath(os.path.join(base, "two_phase_" + time.strftime("%Y%m%d%H%M%S")))
    if os.path.exists(out):
        out += "_{}".format(os.getpid())
    return run_two_phase(list(args.target), env, out, suspects=args.suspects,
                         overflow_first=bool(args.overflow_first), say=say, verbosity=verbosity_flags(args))


def verbosity_flags(args: argparse.Namespace) -> List[str]:
    """The -q/-v/--debug given to this command, for the commands it runs (two-phase passes)."""
    return [flag for flag, field in (("-q", "quiet"), ("-v", "verbose"), ("--debug", "debug"))
            if getattr(args, field, False)]


def split_command(words: Sequence[str]) -> Tuple[str, List[str], List[str]]:
    """``(interpreter, its options, ["--", script, args...] or ["-m", module, args...])``."""
    words = list(words)
    if not words:
        raise CliError("run: " + _NO_SCRIPT, EXIT_USAGE)
    python = sys.executable
    if _INTERPRETER.match(os.path.basename(words[0])):
        python, words = interpreter(words[0]), words[1:]
    options = []  # type: List[str]
    while words and words[0].startswith("-") and words[0] != "-":
        word = words.pop(0)
        letters = word[1:]
        if word == "--":
            break
        if letters[:1] in _WITH_VALUE:  # -W VALUE, -WVALUE, -X VALUE, -XVALUE
            options.append(word)
            if len(letters) == 1:
                if not words:
                    raise CliError("run: python option {} needs a value".format(word), EXIT_USAGE)
                options.append(words.pop(0))
        elif letters[-1:] == "m" and set(letters[:-1]) <= _PYTHON_FLAGS:
            if not words:
                raise CliError("run: -m needs a module name", EXIT_USAGE)
            options.extend(["-" + letters[:-1]] if len(letters) > 1 else [])
            return python, options, ["-m"] + words
        elif letters and set(letters) <= _PYTHON_FLAGS:
            options.append(word)
        else:
            raise CliError("run: python option {} is not supported: give a script or -m MODULE".format(word),
                           EXIT_USAGE)
    if not words or words[0] == "-":
        raise CliError("run: " + _NO_SCRIPT, EXIT_USAGE)
    if not os.path.exists(words[0]):
        raise CliError("{}: no such file or folder".format(words[0]), EXIT_USAGE)
    return python, options, ["--"] + words


def interpreter(word: str) -> str:
    """The interpreter the first word after ``--`` names (see the module doc)."""
    version = "{}.{}".format(*sys.version_info[:2])
    if word in ("python", "python3", "python" + version):
        return sys.executable
    # shutil.which's one rule: a word with a folder is that file (executable, not a folder), a bare
    # name is looked up on PATH. Imported here: only this look-up needs it (~3 ms CPU on Python 3.7).
    import shutil

    found = shutil.which(word)
    if found is None:
        reason = "no such file" if os.path.dirname(word) else "not on PATH"
        raise CliError("{}: no such interpreter ({})".format(word, reason), EXIT_USAGE)
    return found


def faults_from_flags(entries: Any) -> Dict[str, str]:
    """``{"op": spec}`` of the ``--fault OP=SPEC`` flags (None: none), each checked on its own so
    an error (exit 2) shows the flag as typed: one op per flag, a spec the emulator accepts,
    no op twice."""
    faults = {}  # type: Dict[str, str]
    for entry in entries or ():
        if FAULTS_SEPARATOR in entry:
            raise CliError("option --fault={!r}: one OP=SPEC per --fault (give --fault again for another op)".format(
                entry), EXIT_USAGE)
        try:
            ((op, spec),) = parse_faults(entry, "--fault").items()
        except OptionError as exc:
            raise CliError("option --fault={!r}: {}".format(entry, exc.rule), EXIT_USAGE) from None
        if op in faults:
            raise CliError("option --fault={!r}: op {!r} is given twice".format(entry, op), EXIT_USAGE)
        faults[op] = spec
    return faults


def _environment(args: argparse.Namespace) -> Tuple[Dict[str, str], Dict[str, str]]:
    """The child's environment, and which flag set each variable (for error messages)."""
    env = dict(os.environ)
    flags = {}  # type: Dict[str, str]

    def put(var: str, value: Any, flag: str) -> None:
        _not_blank(value, flag)
        if isinstance(value, bool):
            value = "1" if value else "0"
        env[var] = str(value)
        flags[var] = flag

    env[ENV_RUN] = "1"
    for field, flag in _DUMP_FLAGS:
        value = getattr(args, field)
        if value is not None:
            put(ENV_OPTIONS[field], os.path.abspath(value) if field == "dump_path" and value.strip() else value, flag)
    layer_from = getattr(args, "dump_layer_from", None)
    if layer_from is not None:
        _put_layer_from(args, layer_from, put)
    data = layer_from is not None or any(getattr(args, field) is not None for field, _flag in _DUMP_FLAGS
                                         if field != "dump_debug_mode")
    if args.dump_debug or args.dump_debug_mode is not None:
        put(ENV_OPTIONS["enable_dump_debug"], True, "--dump-debug")
        put(ENV_OPTIONS["enable_dump"], False, "--dump-debug")
    elif data:  # a data-dump flag asks for the data dump, whatever the inherited variables say
        put(ENV_OPTIONS["enable_dump"], True, "--dump-path" if args.dump_path is not None else "--dump-*")
        put(ENV_OPTIONS["enable_dump_debug"], False, "--dump-*")
    for row in settings.SETTINGS.values():  # the hook options and --stop: each flag sets its variable
        value = getattr(args, row.name, None) if row.flag or row.negative else None
        if value is not None:
            _not_blank(value, row.flag_for(value))  # before variable_text: abspath('') is the current folder
            put(row.env, row.variable_text(value), row.flag_for(value))
    env[ENV_RUN_LOG_LEVEL] = level_name(args.debug, args.verbose, args.quiet)
    # Which variables the flags set (an inherited value is replaced): the child's errors name the flag.
    env[ENV_RUN_FLAGS] = " ".join(sorted(flags))
    return env, flags


def _not_blank(value: Any, flag: str) -> None:
    """A blank flag value is a usage error: the child reads an empty variable as unset, so
    ``--golden-for "$UNSET"`` would make a plain dump run and ``--dump-path ''`` dump here."""
    if isinstance(value, str) and not value.strip():
        raise CliError("option {}={!r}: must not be blank".format(flag, value), EXIT_USAGE)


def _put_layer_from(args: argparse.Namespace, path: str, put: Any) -> None:
    """--dump-layer-from FILE: NPU_DUMP_LAYER is the suspects file's names (checked here, exit 2)."""
    from ..suspects import dump_layer_of

    if args.dump_layer is not None:
        raise CliError("run: --dump-layer-from and --dump-layer both choose the ops to dump: give one", EXIT_USAGE)
    if args.dump_debug or args.dump_debug_mode is not None:
        raise CliError("run: --dump-layer-from chooses ops of a data dump, not of --dump-debug", EXIT_USAGE)
    try:
        put(ENV_OPTIONS["dump_layer"], dump_layer_of(path, "--dump-layer-from"), "--dump-layer-from")
    except OptionError as exc:
        raise CliError("option --dump-layer-from={!r}: {}".format(exc.value, exc.rule), EXIT_USAGE) from None


def _run_child(command: List[str], env: Dict[str, str]) -> int:
    """Run ``command`` with our stdio; its exit status (a signal N: 128 + N)."""
    restore = []  # type: List[Tuple[int, Any]]

    def handle(signum: int, handler: Any) -> None:
        try:
            restore.append((signum, signal.signal(signum, handler)))
        except ValueError:  # not the main thread (an in-process caller): leave signals alone
            pass

    # Ctrl-C goes to the whole process group: the script handles it; we wait for its status.
    # (A Python handler, not SIG_IGN, which the child would inherit.)
    handle(signal.SIGINT, lambda signum, frame: None)
    channel = NoticeChannel()  # the bundle path printed last even when the script left by os._exit
    try:
        child = subprocess.Popen(command, env=dict(env, **channel.env()), pass_fds=channel.fds)
        channel.started()
        handle(signal.SIGTERM, lambda signum, frame: child.send_signal(signum))
        code = child.wait()
    finally:
        for signum, previous in reversed(restore):
            signal.signal(signum, previous)
    channel.print_if_not_last()
    return 128 - code if code < 0 else code
