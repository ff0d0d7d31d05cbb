"""``NpuDumpSession``: the hook's work for plain ``tf.compat.v1.Session`` scripts (the guide's sess.run mode).

It drives an :class:`~npu_dump_hook.hook.NpuDumpHook` the way ``MonitoredSession`` drives its
hooks (one run-logic implementation), around every ``run`` of the wrapped session::

    sess = NpuDumpSession(tf.compat.v1.Session(config=session_config(options)), options)
        hook.begin()                   # now: randomness edits, capture ops (graph still editable)
        hook.after_create_session()
    sess.run(init); sess.run(cost)     # not training steps: run as they are, logged as skipped
    sess.run(train_op)                 # a training step: before_run -> run (+ capture) -> after_run
        ... after max_steps training steps (default 1):
        hook.end()                     # run.json, bundle
        stop="exit" (default): print the final line, end the process with exit status 0
        stop="continue": later runs go straight to the session; nothing more is dumped

An inference loop (``mode="infer"``, or ``"auto"`` when the script built no training op into the
graph: a loaded SavedModel's optimizer does not count) works the same
way: the restore, initializers and warm-up runs are skipped, the first run of the model on a
fed batch is the dumped iteration.
Callables made through the wrapper (``make_callable``, and ``_make_callable_from_options``, which
Keras's graph-mode train function uses on TF 1.15 and 2.x) run through :meth:`NpuDumpSession.run`
while the hook's run lasts (:class:`RoutedCallable`), so Keras ``fit`` on
``tf.compat.v1.keras.backend.set_session(NpuDumpSession(sess))`` dumps one training step.

With ``stop="continue"`` the bundle is collected when the dumped steps are done; a wrapper
whose steps never finished collects at ``close()``, on leaving the ``with`` block, or at
interpreter exit.

Wrap the session before its first run: the graph is edited once, at wrapping, and TensorFlow
hands a session every op of its graph at its first run and ignores later edits of those ops
(it only logs "This mutation will have no effect"), so after an earlier run through the bare
session (even an initializer) the randomness policy and the emulated numerics would be void.
Such a session is refused when the randomness policy edited a random source of its graph
other than a variable's initializer (dropout, noise, shuffles):
right after its graph edits the wrapper asks the session whether it already holds a value of
any of the graph's variables (one small run of ``is_variable_initialized`` checks, under the
``npu_dump_hook_session_probe`` scope) and raises :class:`~npu_dump_hook.errors.NpuDumpError`
if it does, before any step (carrying over the variables into a fresh session would change the
script's state behind its back). Without a random source to edit (an inference graph loaded
from a SavedModel into the session, which can only be wrapped after ``loader.load``) it is
logged and the run goes on. A session that ran only ops that touch no variable is not told apart. Under the runner, which watches
every run of the session itself (:data:`RUNS_BEFORE`), no probe runs; a session it had to wrap
after bare runs (no training or random op in them) gets a bundle warning instead, since the
unmodified script cannot be changed to wrap earlier.
"""
import atexit
import functools
import logging
import shutil
import sys
from typing import Any, List, Optional

from . import _tf, settings
from ._signals import ends_as_meant
from .constants import RUNS_BEFORE_MARK
from .errors import NpuDumpError
from .hook import NpuDumpHook
from .options import DumpOptions
from .settings import STOP_MODES  # re-exported: what stop= accepts (its row in the settings table)

__all__ = ["NpuDumpSession", "RoutedCallable", "STOP_MODES", "RUNS_BEFORE"]

logger = logging.getLogger(__name__)

#: Set by the runner on a session it watches: how many runs went to the bare session before it
#: was wrapped (then no probe runs, see the module doc).
RUNS_BEFORE = RUNS_BEFORE_MARK
#: Name scope of the wrapper's own check whether the session already ran (hook ops: ``npu_dump_hook_*``).
PROBE_SCOPE = "npu_dump_hook_session_probe"


class NpuDumpSession(object):
    """Wraps ``session`` (a ``tf.compat.v1.Session`` or any object with ``run``, ``graph`` and ``close``).

    Args:
        session: the session the script trains with.
        options: :class:`DumpOptions` (None: as :class:`NpuDumpHook` reads them).
        stop: ``"exit"`` (default) ends the process with status 0 after the dumped steps and
            the bundle (the script's own loop cannot be stopped otherwise); ``"continue"``
            keeps training without further dumping.
        hook: an :class:`NpuDumpHook` made beforehand (not yet begun), instead of ``options``
            and ``hook_options``: for a caller that needs ``hook.options`` before the session
            exists (:mod:`npu_dump_hook.runner` builds the session config from them).
        **hook_options: every keyword of :class:`NpuDumpHook` (``max_steps``, ``randomness``,
            ``output_dir``, ``bundle_dir``, ``strict``, ...).
    """

    def __init__(self, session: Any, options: Optional[DumpOptions] = None, *, stop: str = "exit",
                 hook: Optional[NpuDumpHook] = None, **hook_options: Any) -> None:
        settings.check_keyword("stop", stop)
        settings.check_combination({"hook": hook, "options": options, "hook_options": hook_options},
                                   rules=settings.SESSION_RULES)
        self._session = session
        self._stop = stop
        self.hook = hook if hook is not None else NpuDumpHook(options, **hook_options)
        self._finished = False
        self.hook._editable_graph = True  # noqa: SLF001 - a plain session's graph stays editable (train/late.py)
        variables = _user_variables(session)  # before begin() adds the hook's own
        with session.graph.as_default():
            self.hook.begin()
        self._check_not_run_before(session, variables)  # after the edits: a first run takes them in
        self.hook.after_create_session(session, None)
        atexit.register(self._finish_at_exit)

    def _check_not_run_before(self, session: Any, variables: List[Any]) -> None:
        """Refuse a session that ran before the graph edits (module doc); under the runner, warn."""
        runs = getattr(session, "__dict__", {}).get(RUNS_BEFORE)
        if runs is not None:  # the runner counted them
            if runs:
                message = ("the tf.compat.v1.Session ran {} time(s) before the hook began (no training or random op "
                           "in those runs): TensorFlow ignores the hook's edits of ops built before, so the "
                           "randomness policy and the emulated numerics may not apply to them".format(runs))
                logger.warning("NpuDumpSession: %s", message)
                self.hook.warnings.append(message)
            return
        held = _initialized_count(session, variables)
        # Edits whose loss matters: not those of variable initializers (the values are already there)
        edited = [source["op"] for source in self.hook.facts.randomness.get("sources", ())
                  if str(source.get("action", "")).startswith(("stripped", "pinned"))
                  and "/Initializer/" not in source["op"]]
        if held and not edited:  # a SavedModel loaded into the session, then wrapped: nothing edited is lost
            logger.info("NpuDumpSession: the session already holds %d variable value(s) (a restore or an initializer "
                        "ran before wrapping); no random source needed an edit", held)
        elif held:
            self.hook.dump.end()  # as after a failed begin(): nothing of this hook stays behind
            shutil.rmtree(self.hook.run_dir, ignore_errors=True)
            self._finished = True
            raise NpuDumpError(
                "NpuDumpSession: the session already ran (it holds values of {} of the graph's {} variable(s): an "
                "initializer, a restore or training steps ran through the bare session). TensorFlow ignores edits "
                "of ops a session has run, so the randomness policy's edits of {} random source(s) ({}{}) would "
                "silently not apply. Wrap the session before its first run: sess = NpuDumpSession("
                "tf.compat.v1.Session(...)), then sess.run(init) and the training loop through it (or use "
                "npu-dump-hook run, which wraps it for you)".format(held, len(variables), len(edited),
                                                                    ", ".join(edited[:3]),
                                                                    ", ..." if len(edited) > 3 else ""))

    # -- the session interface ------------------------------------------------------------
    @property
    def graph(self) -> Any:
        return self._session.graph

    @property
    def session(self) -> Any:
        """The wrapped session."""
        return self._session

    def run(self, fetches: Any, feed_dict: Any = None, options: Any = None, run_metadata: Any = None) -> Any:
        if self._finished:
            return self._session.run(fetches, feed_dict=feed_dict, options=options, run_metadata=run_metadata)
        v1 = _tf.tf_v1()
        context = v1.train.SessionRunContext(v1.train.SessionRunArgs(fetches, feed_dict), self._session)
        extra = self.hook.before_run(context)
        if extra is None:
            results, extra_results = self._session.run(fetches, feed_dict=feed_dict, options=options,
                                                       run_metadata=run_metadata), None
        else:
            feeds = dict(feed_dict or {})
            feeds.update(extra.feed_dict or {})
            results, extra_results = self._session.run([fetches, extra.fetches], feed_dict=feeds,
                                                       options=_merged_options(options, extra.options),
                                                       run_metadata=run_metadata)
        self.hook.after_run(context, v1.train.SessionRunValues(results=extra_results, options=options,
                                                               run_metadata=run_metadata))
        if context.stop_requested:
            self.finish()
            if self._stop == "exit":
                raise SystemExit(0)
        return results

    def close(self) -> None:
        self.finish()
        self._session.close()

    def __enter__(self) -> "NpuDumpSession":
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        if ends_as_meant(exc_type):
            self.close()
        else:  # the script failed or was terminated: as with MonitoredSession, no end() and no bundle
            self.abandon()
            self._session.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)  # sess_str, list_devices, ...

    # -- callables: what Keras in graph mode runs its train function with ------------------
    def make_callable(self, fetches: Any, feed_list: Any = None, accept_options: bool = False) -> Any:
        """``Session.make_callable`` whose calls are :meth:`run` calls of this wrapper (so a
        training step run through it is counted and dumped); once the hook's run is over, the
        session's own callable."""
        return RoutedCallable(self, lambda: self._session.make_callable(fetches, feed_list, accept_options),
                              fetches=fetches, feeds=list(feed_list or []))

    def _make_callable_from_options(self, callable_options: Any, own: Any = None) -> Any:
        """``Session._make_callable_from_options``, which Keras's graph-mode train function uses
        (TF 1.15 and 2.x): each call is a :meth:`run` of its fetches, targets and feeds.
        ``own``: makes the session's own callable (default: the wrapped session's)."""
        if own is None:
            own = functools.partial(self._session._make_callable_from_options, callable_options)  # noqa: SLF001
        return RoutedCallable(self, own, options=callable_options)

    # -- ending -------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        """True once the run is over for the hook: collected (:meth:`finish`) or abandoned."""
        return self._finished

    def finish(self) -> None:
        """End the hook's run now (``end()``: run.json, bundle) unless it has ended; the session
        stays open. ``stop="exit"`` prints the bundle path."""
        if self._finished:
            return
        self._finished = True
        self.hook.end(self._session)
        if self._stop == "exit" and self.hook.bundle is not None:
            # The last line of the process: where the bundle went.
            sys.stdout.flush()
            print(self.hook.bundle.location)

    def abandon(self) -> None:
        """The script failed: end without ``end()`` and without a bundle (MonitoredSession's contract)."""
        self._finished = True

    def _finish_at_exit(self) -> None:
        if not self._finished and self.hook._steps_run:  # noqa: SLF001 - the hook is ours
            logger.warning("NpuDumpSession: collecting at interpreter exit (the session was never closed)")
            self.finish()


class RoutedCallable(object):
    """A session callable whose calls go through an :class:`NpuDumpSession`'s :meth:`~NpuDumpSession.run`
    while its hook's run lasts, then to the session's own callable (made on first need).

    Made from ``make_callable`` arguments (``fetches``, ``feeds``) or from ``CallableOptions``
    (``options``: its ``feed``, ``fetch`` and ``target`` names and ``run_options``). A
    ``tensor_connection`` (a tensor fed from another tensor, which ``run`` cannot express) is
    not routed: logged once, the session's own callable runs it.
    """

    def __init__(self, wrapper: NpuDumpSession, own: Any, fetches: Any = None, feeds: Any = None,
                 options: Any = None) -> None:
        self._wrapper, self._make_own, self._own = wrapper, own, None  # type: NpuDumpSession, Any, Any
        self._fetches, self._feeds, self._options = fetches, feeds, options
        self._targets = None  # type: Any
        self._run_options = None  # type: Any
        self.routed = options is None or not len(options.tensor_connection)
        if not self.routed:
            logger.warning("NpuDumpSession: a callable feeds tensors from other tensors (tensor_connection): its "
                           "runs are not seen by the hook (feed numpy arrays to have the step dumped)")

    def bare(self, *args: Any, **kwargs: Any) -> Any:
        """The session's own callable, called."""
        if self._own is None:
            self._own = self._make_own()
        return self._own(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._wrapper.finished or not self.routed:
            return self.bare(*args, **kwargs)
        if self._options is not None and self._targets is None:
            self._resolve()
        feeds = list(self._feeds)  # values given for fewer feeds: the run says which one is missing, as TF's does
        if self._targets is None:  # make_callable: its fetches as given
            return self._wrapper.run(self._fetches, feed_dict=dict(zip(feeds, args)), options=kwargs.get("options"),
                                     run_metadata=kwargs.get("run_metadata"))
        results = self._wrapper.run(self._fetches + self._targets, feed_dict=dict(zip(feeds, args)),
                                    options=self._run_options, run_metadata=kwargs.get("run_metadata"))
        return results[:len(self._fetches)]

    def _resolve(self) -> None:
        """The tensors and ops the ``CallableOptions`` name, in the wrapped graph."""
        graph, options = self._wrapper.graph, self._options
        self._feeds = [graph.as_graph_element(name) for name in options.feed]
        self._fetches = [graph.as_graph_element(name) for name in options.fetch]
        self._targets = [graph.as_graph_element(name) for name in options.target]
        self._run_options = options.run_options if options.HasField("run_options") else None


def _user_variables(session: Any) -> List[Any]:
    """The global and local variables of ``session``'s graph (none for an object that is not a TF session)."""
    if not isinstance(session, _tf.session_classes()[0]):
        return []
    v1 = _tf.tf_v1()
    with session.graph.as_default():
        return list(v1.global_variables()) + list(v1.local_variables())


def _initialized_count(session: Any, variables: List[Any]) -> int:
    """How many of ``variables`` the bare ``session`` holds a value of: one run of their
    ``is_variable_initialized`` checks (ops under :data:`PROBE_SCOPE`)."""
    if not variables:
        return 0
    v1 = _tf.tf_v1()
    with session.graph.as_default(), v1.name_scope(PROBE_SCOPE):
        checks = v1.stack([v1.is_variable_initialized(variable) for variable in variables])
    return int(session.run(checks).sum())


def _merged_options(options: Any, extra: Any) -> Any:
    """The caller's ``RunOptions`` with the hook's (its debug watches: loop-body capture) added, as
    ``MonitoredSession`` merges a hook's; the caller's object is not changed."""
    if extra is None:
        return options
    if options is None:
        return extra
    merged = type(options)()
    merged.CopyFrom(options)
    merged.debug_options.debug_tensor_watch_opts.extend(extra.debug_options.debug_tensor_watch_opts)
    return merged
