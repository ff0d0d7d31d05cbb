"""Run an unmodified training script with one :class:`~npu_dump_hook.hook.NpuDumpHook` injected.

``npu-dump-hook run [options] -- python train.py ARGS`` starts a child interpreter with
:func:`bootstrap_command`; CI wrappers can start it themselves::

    python -m npu_dump_hook.runner [--] train.py ARGS      # or: -m package.module ARGS

Options come from the environment: ``NPU_DUMP_*`` (the dump options, read by
:meth:`DumpOptions.from_env`) and ``NPU_DUMP_HOOK_*`` (the hook's keywords, the stop mode, the
log level; listed in :mod:`npu_dump_hook.constants`), which the command line's flags set.

The package: :mod:`._settings` reads the variables (:class:`RunSettings`, each checked by its
row of :mod:`npu_dump_hook.settings`), :mod:`._install` installs the injection (and the
environment-only :func:`start`), :mod:`._after_import` is the import hook that waits for
TensorFlow's modules, :mod:`._inject` patches them and hands out the one hook
(:class:`Injection`), :mod:`._checkpoints` keeps the script's checkpoint folders its own,
:mod:`._child` runs the script (:func:`main`), :mod:`._hook_error` tells the hook's own errors
as one line, :mod:`._bootstrap` makes its argv
(:func:`bootstrap_command`). ``npu-dump-hook run``'s own process imports only that, the settings
and :mod:`._notice`: the names of the other modules load on first use.
Program name, exit codes and log format are the command line's (:mod:`npu_dump_hook._cli_conventions`).

Call order in the child::

    main(argv)                      [_child]
      RunSettings.from_env()        every variable checked before the script starts (exit 2)
                                    [_settings]
      install(settings)             [_install, _after_import]
                                    TensorFlow is not imported: a finder on sys.meta_path waits
                                    for five of its modules and Keras's (_tf.KERAS_TRAINING_MODULES)
                                    and patches each once it has loaded (at once if it is
                                    loaded already):
          _tf.SESSION_MODULE            Session/InteractiveSession.__init__, Session.__exit__,
                                        BaseSession.run, close, make_callable and
                                        _make_callable_from_options
          _tf.MONITORED_SESSION_MODULE  _MonitoredSession.__init__ (MonitoredSession, Singular-
                                        MonitoredSession, MonitoredTrainingSession), the
                                        session creation inside it, MonitoredTrainingSession
          _tf.ESTIMATOR_MODULE          Estimator.train (and so NPUEstimator's)
          SAVER_MODULE, SAVER_HOOK_MODULE   Saver.save, CheckpointSaverHook.begin [_checkpoints]
      the script runs as __main__   as ``python SCRIPT`` runs it: its code compiled and run in a
                                    new __main__ module (runpy.run_path cannot: it sets argv[0]
                                    to __file__), sys.argv = [SCRIPT as typed, ARGS...],
                                    sys.path[0] = its folder, __file__ as typed on 3.7 and
                                    absolute from 3.9; a folder or zip with __main__.py through
                                    runpy.run_path, -m MODULE through runpy.run_module
        the first training entry point the script reaches gets the process's one hook [_inject]:
          Estimator.train(...)          hooks += [hook]; the estimator's session config carries
                                        the dump options for this call (session_config()),
                                        unless it has its own NPU dump options; from then on
                                        it trains in {run folder}/model_dir, seeded with the
                                        latest checkpoint of its model_dir (which stays as it
                                        was), unless NPU_DUMP_HOOK_KEEP_CHECKPOINTS=1
          MonitoredSession(...) made by the script (not by an Estimator), on a graph with
                                        training ops: hooks += [hook]; its Chief/Worker session
                                        creator makes its session with the dump options
          MonitoredTrainingSession(...) claims the hook for the MonitoredSession it makes, whose
                                        checkpoint_dir is {run folder}/checkpoints, seeded with
                                        the latest checkpoint of the script's (a golden run: not
                                        seeded), unless NPU_DUMP_HOOK_KEEP_CHECKPOINTS=1 in a dump run
          tf.compat.v1.Session(...) made by the script (not by a monitored session: those come
                                        from _CoordinatedSessionCreator.create_session, on a
                                        finalized graph): on a graph with training ops,
                                        config += dump options (the hook is reserved for it);
                                        at its first run that is a training step (run(),
                                        make_callable(), _make_callable_from_options(): Keras
                                        fit/train_on_batch in graph mode) it gets the hook and
                                        is wrapped as NpuDumpSession(stop="continue") for the
                                        runs of that thread (not queue-runner threads); a
                                        session that never trains is never wrapped (its graph
                                        is not edited; model_to_estimator's set_weights
                                        session); after the dumped steps the bundle is written
                                        and, with stop="exit" (default), SystemExit(0) ends
                                        the script [_sessions]
          keras Model.fit/train_on_batch  called eagerly (TF 2.x default): one line, exit 4
                                        before training (allow_no_bundle: a warning) [_sessions]
        once a hook exists nothing else is injected, and every checkpoint the script saves
        (Saver.save, CheckpointSaverHook) goes under {run folder}/checkpoints, never into its
        own folders [_checkpoints]; a script that imports NpuDumpHook or
        NpuDumpSession itself gets nothing injected (its own hook decides)
      finish()                      the script returned or exited: a wrapped session whose
                                    steps did not end the run is collected, a monitored
                                    session left open is closed (its hook's end())
      print(bundle path)            the last line on stdout, when a bundle was written
      exit status                   the script's: its SystemExit passes through; an uncaught
                                    exception is printed by sys.excepthook without the
                                    runner's frames, status 1 (an NpuDumpError the injected
                                    hook raised -- a method of Injection.parts_at_work() on its
                                    traceback, e.g. a golden run's FingerprintMismatchError: one
                                    line npu-dump-hook: ErrorType: message, its traceback with
                                    -v/--debug; an OptionError about an option
                                    the run was given, e.g. a --fault naming no op of the
                                    graph: one line, status 2); a script that ends with 0 but
                                    without a bundle: EXIT_NO_BUNDLE (4), unless
                                    NPU_DUMP_HOOK_ALLOW_NO_BUNDLE=1 (--allow-no-bundle)

Only ``tf.compat.v1`` graph-mode training is seen (Keras in graph mode included); eager code is
not hooked. What a script's own session config holds wins: when it
already switches the NPU dump (or overflow check) on, those options are the hook's too.

From the environment alone (a CI wrapper that cannot change the command)::

    export PYTHONPATH=$(python -m npu_dump_hook.runner --pythonpath)${PYTHONPATH:+:$PYTHONPATH}
    NPU_DUMP_HOOK_RUN=1 python train.py ARGS

:func:`site_dir` holds a ``sitecustomize`` that Python imports at start-up; it runs the
``sitecustomize`` it hides, then, with ``NPU_DUMP_HOOK_RUN`` on, :func:`start`: the same
injection, with the bundle path printed at exit, and the script run by Python itself.
``NPU_DUMP_HOOK_RUN=1`` alone cannot work: before a script runs, the interpreter executes no
code but its own and what ``site`` finds -- ``.pth`` files in site-packages, which would hook
every program of the environment (the package installs none), or a ``sitecustomize`` on
``sys.path``, which needs ``PYTHONPATH``.
"""
import importlib
from typing import Any

from .._cli_conventions import EXIT_SCRIPT_ERROR, EXIT_USAGE, PROG
from ..settings import format_faults, parse_faults
from ._bootstrap import bootstrap_command
from ._notice import NoticeChannel
from ._settings import RunSettings

__all__ = ["RunSettings", "Injection", "install", "installed", "start", "site_dir", "bootstrap_command", "main",
           "PROG", "parse_faults", "format_faults", "NoticeChannel"]

#: The status of a bad variable: the command line's usage error.
EXIT_USAGE = EXIT_USAGE  # noqa: PLW0127 - re-exported under the name it had here
#: The status of a script that died of an uncaught exception (as Python exits).
EXIT_FAILED = EXIT_SCRIPT_ERROR

# name -> module: loaded on first use. ``npu-dump-hook run``'s own process only checks the
# variables and starts the child (bootstrap_command, RunSettings, NoticeChannel); the patches and
# what they import (_inject, _sessions, determinism...) are the child's, which imports them in main().
_LAZY = {
    "_AfterImport": ("._after_import", "AfterImport"),  # its name before the split
    "main": ("._child", "main"),
    "Injection": ("._inject", "Injection"),
    "install": ("._install", "install"),
    "installed": ("._install", "installed"),
    "site_dir": ("._install", "site_dir"),
    "start": ("._install", "start"),
}


def __getattr__(name: str) -> Any:  # PEP 562, Python 3.7+
    if name in _LAZY:
        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module, __name__), attribute)
        globals()[name] = value
        return value
    raise AttributeError("module {!r} has no attribute {!r}".format(__name__, name))
