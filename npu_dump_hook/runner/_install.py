"""Installing the injection in this process: once, importing no TensorFlow.

:func:`install` makes the process's one :class:`~npu_dump_hook.runner._inject.Injection` and
has it patch five TensorFlow modules and Keras's ``Model`` -- now for those already loaded, else through an
:class:`~npu_dump_hook.runner._after_import.AfterImport` finder once the script loads them
(which methods of each: the call order in :mod:`npu_dump_hook.runner`).

:func:`start` is the environment-only mode (the ``sitecustomize`` in :func:`site_dir`): the
same installation, with the pending collection and the bundle path at interpreter exit.
"""
import atexit
import logging
import os
import sys
import threading
from typing import Optional

from .. import _tf
from .._cli_conventions import LogFormatter, print_error
from ..errors import NpuDumpError, OptionError
from ._after_import import AfterImport
from ._checkpoints import SAVER_HOOK_MODULE, SAVER_MODULE
from ._hook_error import excepthook
from ._inject import Injection
from ._settings import RunSettings

__all__ = ["install", "installed", "start", "site_dir", "log_to_stderr"]

logger = logging.getLogger("npu_dump_hook.runner")

_installed = None  # type: Optional[Injection]
_install_lock = threading.Lock()


def install(settings: Optional[RunSettings] = None) -> Injection:
    """Install the injection in this process (once; later calls return the first one).

    Imports no TensorFlow: the patches are applied when the script imports it (or now, for
    modules already loaded). ``settings`` default to :meth:`RunSettings.from_env`.
    """
    global _installed
    with _install_lock:
        if _installed is not None:
            return _installed
        injection = Injection(settings if settings is not None else RunSettings.from_env())
        _installed = injection
        if injection.settings.enabled:
            _patch_when_loaded(injection)
        return injection


def _patch_when_loaded(injection: Injection) -> None:
    names = (_tf.SESSION_MODULE, _tf.MONITORED_SESSION_MODULE, _tf.ESTIMATOR_MODULE, SAVER_MODULE,
             SAVER_HOOK_MODULE) + _tf.KERAS_TRAINING_MODULES

    def patch(name: str) -> None:
        try:
            injection.patch(name)
        except Exception:  # noqa: BLE001 - never break the script's import
            logger.warning("npu_dump_hook: could not patch %s: nothing injected there", name, exc_info=True)

    waiting = [name for name in names if name not in sys.modules]
    for name in names:
        if name not in waiting:
            patch(name)
    if waiting:
        sys.meta_path.insert(0, AfterImport(waiting, patch))


def installed() -> Optional[Injection]:
    """The injection :func:`install` made in this process, if any."""
    return _installed


def site_dir() -> str:
    """The folder whose ``sitecustomize`` starts the injection from the environment alone (see
    :func:`start`): put it on ``PYTHONPATH``."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(package, "_site")


def start() -> Optional[Injection]:
    """Environment-only mode: what ``NPU_DUMP_HOOK_RUN=1`` with :func:`site_dir` on ``PYTHONPATH``
    runs at interpreter start-up, before the script.

    Installs the injection from the environment and, at exit, collects what is pending (unless
    the script died of an exception) and prints the bundle path. A bad variable is one line on
    stderr, and then nothing is injected (start-up cannot stop the interpreter cleanly). The
    hook's own errors are one line, as under ``npu-dump-hook run`` (:mod:`._hook_error`).
    """
    try:
        settings = RunSettings.from_env()
    except OptionError as exc:
        print_error("{} (nothing injected)".format(exc))
        return None
    log_to_stderr(settings.log_level)
    injection = install(settings)
    atexit.register(_at_exit, injection)
    sys.excepthook = excepthook(injection, settings.log_level, sys.excepthook)  # the hook's own errors: one line
    return injection


def _at_exit(injection: Injection) -> None:
    failed = getattr(sys, "last_value", None) is not None  # the script ended with an uncaught exception
    if not failed:
        try:
            injection.finish()
        except NpuDumpError as exc:
            print_error(exc)
    injection.announce(explain=not failed)


def log_to_stderr(level: Optional[str]) -> None:
    """The package's log records on stderr at ``level``, as the command line prints its own."""
    package = logging.getLogger("npu_dump_hook")
    if level is None or any(isinstance(h.formatter, LogFormatter) for h in package.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogFormatter(drop_script_prefix=True))
    package.addHandler(handler)
    package.setLevel(getattr(logging, level))
    package.propagate = False
