"""The child's entry point: run the script as ``python SCRIPT`` would, with the injection installed.

:func:`bootstrap_command` is the argv ``npu-dump-hook run`` starts; it calls :func:`main`
(as does ``python -m npu_dump_hook.runner``)::

    main(argv)
      RunSettings.from_env()        every variable checked before the script starts (exit 2)
      install(settings)             the patches, applied as TensorFlow loads (:mod:`._install`)
      the script runs as __main__   as ``python SCRIPT`` runs it (sys.argv, sys.path[0],
                                    __file__: the call order in :mod:`npu_dump_hook.runner`)
      finish()                      the script returned or exited: pending collection
      print(bundle path)            the last line on stdout, when a bundle was written
      exit status                   the script's: its SystemExit passes through; an uncaught
                                    exception is printed by sys.excepthook without the
                                    runner's frames, status 1; an NpuDumpError the injected
                                    hook raised (a golden run's FingerprintMismatchError) is
                                    one line ``npu-dump-hook: ErrorType: message``, status 1
                                    (with -v/--debug: after its traceback); an OptionError about an
                                    option the run was given (a --fault naming no op of the
                                    graph, raised at the first session run) is one line
                                    ``npu-dump-hook: option ...``, status 2 (EXIT_USAGE), as
                                    a bad variable is before the script starts
"""
import functools
import importlib.machinery
import io
import os
import runpy
import sys
import types
from typing import Any, List, Optional, Sequence

from .._cli_conventions import EXIT_NO_BUNDLE, EXIT_SCRIPT_ERROR, EXIT_USAGE, print_error
from ..constants import ENV_OPTIONS
from ..settings import ENV_RUN_ALLOW_NO_BUNDLE
from ..errors import NpuDumpError, OptionError
from ._inject import Injection
from ._hook_error import print_hook_error, raised_by_the_hook
from ._bootstrap import bootstrap_command  # noqa: F401 - its home before the parent stopped importing this module
from ._install import install, log_to_stderr, site_dir
from ._settings import RunSettings, as_given

__all__ = ["bootstrap_command", "main", "USAGE"]

USAGE = ("usage: python -m npu_dump_hook.runner [--] SCRIPT [ARGS...] | -m MODULE [ARGS...] | --pythonpath\n"
         "(options: NPU_DUMP_* and NPU_DUMP_HOOK_* variables, see npu_dump_hook/constants.py)")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the child: ``main(["--", "train.py", ...])`` (default: ``sys.argv[1:]``).

    Replaces ``sys.argv`` and ``sys.path[0]`` as ``python train.py`` would have set them, so it
    is meant for the interpreter started for the script (``-m`` or :func:`bootstrap_command`).
    Returns the exit status, or raises the script's ``SystemExit``.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "--":
        args = args[1:]
    status = _before_the_script(args)
    if status is not None:
        return status
    module = args[1] if args[0] == "-m" else None
    script, rest = (None, args[2:]) if module else (args[0], args[1:])
    try:
        settings = RunSettings.from_env()
    except OptionError as exc:
        print_error(exc)
        return EXIT_USAGE
    log_to_stderr(settings.log_level)
    if settings.dump_layer_from is not None:  # the hook reads NPU_DUMP_LAYER: the suspects' names
        os.environ[ENV_OPTIONS["dump_layer"]] = settings.dump_layer() or ""
    injection = install(settings)
    _set_sys_path(script)
    try:
        if module is not None:
            sys.argv = [module] + rest
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [script] + rest
            _run_script(script)
    except SystemExit as exc:
        ended_ok = exc.code in (None, 0)
        status = _end(injection, ended_ok)
        if status and ended_ok:
            raise SystemExit(status)
        raise
    except KeyboardInterrupt as exc:
        raise exc.with_traceback(_script_frames(exc.__traceback__))
    except BaseException as exc:  # noqa: BLE001 - printed as Python prints an uncaught exception
        tb = _script_frames(exc.__traceback__)
        shown = as_given(exc) if isinstance(exc, NpuDumpError) else exc  # an option by the flag typed
        if isinstance(exc, OptionError) and shown is not exc:
            # an option the run was given, found wrong once the graph exists (a --fault naming no
            # op of it): the user's typing, not the script's crash -- one line, as before it started
            print_error(shown)
            injection.announce(explain=False)
            return EXIT_USAGE
        if shown is not exc:
            shown.__cause__, shown.__suppress_context__ = exc.__cause__, exc.__suppress_context__
        if raised_by_the_hook(exc, injection):  # not the script's crash: one line (module _hook_error)
            print_hook_error(shown, tb, settings.log_level)
        else:
            sys.excepthook(type(shown), shown.with_traceback(tb), tb)
        injection.announce(explain=False)
        return EXIT_SCRIPT_ERROR
    return _end(injection)


def _before_the_script(args: Sequence[str]) -> Optional[int]:
    """The status to exit with before any script runs (--pythonpath, --help, no or no such
    script), as ``python`` itself answers; None: go on."""
    if args[:1] == ["--pythonpath"]:
        print(site_dir())
        return 0
    if not args or args[0] in ("-h", "--help") or (args[0] == "-m" and len(args) < 2):
        print(USAGE, file=sys.stderr if not args or args[0] == "-m" else sys.stdout)
        return EXIT_USAGE if not args or args[0] == "-m" else 0
    if args[0] != "-m" and not os.path.exists(args[0]):
        print("{}: can't open file {!r}: [Errno 2] No such file or directory".format(sys.executable, args[0]),
              file=sys.stderr)
        return EXIT_USAGE
    return None


def _run_script(script: str) -> None:
    """Run ``script`` as ``python SCRIPT`` does (the caller has set sys.argv and sys.path)."""
    if os.path.isdir(script) or _is_zip(script):
        runpy.run_path(script, run_name="__main__")  # its __main__.py; sys.argv[0] stays as typed
        return
    filename = os.path.abspath(script) if sys.version_info >= (3, 9) else script
    opener = getattr(io, "open_code", None) or functools.partial(open, mode="rb")  # open_code: 3.8+
    with opener(script) as handle:
        source = handle.read()
    code = compile(source, filename, "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=filename, __cached__=None, __package__=None, __spec__=None,
                           __loader__=importlib.machinery.SourceFileLoader("__main__", filename))
    sys.modules["__main__"] = module  # for good, as in a direct run (pickle, atexit handlers)
    exec(code, module.__dict__)


def _set_sys_path(script: Optional[str]) -> None:
    """sys.path[0] as ``python SCRIPT`` / ``python -m MODULE`` sets it (not in -I / -P modes,
    where Python adds nothing and neither did the bootstrap)."""
    if sys.flags.isolated or getattr(sys.flags, "safe_path", False) or not sys.path:
        return
    if script is None:
        sys.path[0] = os.getcwd()
    elif os.path.isdir(script) or _is_zip(script):
        del sys.path[0]  # runpy puts a folder or zip with __main__.py there itself
    else:
        sys.path[0] = os.path.dirname(os.path.realpath(script))


def _is_zip(path: str) -> bool:
    import zipfile

    return not path.endswith(".py") and zipfile.is_zipfile(path)


def _script_frames(tb: Any) -> Any:
    """``tb`` without its leading frames of this module and runpy."""
    ours = {_source(__file__), _source(runpy.__file__), "<frozen runpy>"}
    while tb is not None and _source(tb.tb_frame.f_code.co_filename) in ours:
        tb = tb.tb_next
    return tb


def _source(path: str) -> str:
    if path.startswith("<"):
        return path
    path = os.path.normcase(os.path.abspath(path))
    return path[:-1] if path.endswith(".pyc") else path


def _end(injection: Injection, ended_ok: bool = True) -> int:
    """After the script: pending collection, then the bundle path as the last line. ``ended_ok``:
    the script ends with status 0 (a missing bundle then sets the status; a script's own non-zero
    status, e.g. 143 after a SIGTERM, is kept, so the line naming status 4 is not printed)."""
    status = 0
    try:
        injection.finish()
    except NpuDumpError as exc:
        print_error(exc)
        status = EXIT_SCRIPT_ERROR
    injection.announce()
    if not status and ended_ok and injection.bundle_missing:
        print_error("no bundle was written: exit status {} ({}=1 or --allow-no-bundle keeps the script's "
                    "status)".format(EXIT_NO_BUNDLE, ENV_RUN_ALLOW_NO_BUNDLE))
        status = EXIT_NO_BUNDLE
    return status
