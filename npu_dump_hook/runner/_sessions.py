"""The runner's patches of ``tf.compat.v1.Session`` and Keras (a mixin of :class:`.Injection`).

A session the script makes on a graph with training ops -- with mode auto/infer any session it
makes while no hook is bound, since SavedModel and frozen-graph scripts make theirs before the
graph is loaded -- gets the dump options in its config at once (the hook is reserved for it,
:meth:`Injection._reserve`), so the session that runs the iteration on a real NPU is one GE
dumps; and the hook itself at its first
run that is a training step (:mod:`npu_dump_hook.train.training_step`) or, on a graph with
training ops, runs a random op or a variable-initialization check (so the randomness policy
edits the graph before they run, and before TensorFlow sends the session the ops it would then
no longer let an edit change: Keras checks its variables before initializing them): then
it is wrapped as ``NpuDumpSession(stop="continue")`` and its runs -- ``run``, and the callables
of ``make_callable`` and ``_make_callable_from_options``, which Keras's graph-mode train function
uses on TF 1.15 and 2.x -- go through the wrapper. A session whose runs do neither is never
wrapped (its graph is not edited); one that was wrapped and is closed without a training step
(the checkpoint-saving session of ``model_to_estimator``: initializers, ``set_weights``, ``save``)
drops its hook unused (:meth:`SessionPatches._release`; its run folder is removed unless it holds
the checkpoints the session saved, which the script loads next: ``model_to_estimator``'s
warm start), so the script's training (``Estimator.train``) gets a new hook. Keras ``fit``/``train_on_batch`` called
eagerly stop the script with one line (:meth:`SessionPatches._graph_mode_only`). With mode
auto/infer a session not wrapped yet is also wrapped at its first inference run (:mod:`._infer`),
except, under auto, the runs of Keras ``predict``/``evaluate`` (a training script's check of its
model before ``fit`` is not an inference script; ``--mode infer`` dumps them).
Nothing here imports TensorFlow: the patches run once the script has loaded it.
"""
import functools
import inspect
import logging
import os
import shutil
import sys
import threading
from typing import Any, Callable, Dict, List, Tuple

from .. import _tf
from .._cli_conventions import EXIT_NO_BUNDLE, print_error
from .._signals import ends_as_meant
from ..constants import RUNS_BEFORE_MARK as RUNS_BEFORE
from ..determinism import SHUFFLE_SEED_INPUTS, STATEFUL_TYPES, STATELESS_SEED_INPUT
from ._infer import restored_mark, run_verdict, wants_inference

__all__ = ["SessionPatches", "trains", "set_patch"]

logger = logging.getLogger("npu_dump_hook.runner")

_WRAPPER = "_npu_dump_hook_wrapper"
_PENDING = "_npu_dump_hook_pending"  # not wrapped yet: the reserved hook, or None (no config given)
_DETECTOR = "_npu_dump_hook_detector"
_RESTORED = "_npu_dump_hook_restored"
#: ``(graph.version, trains(graph))`` as the session's creation found them (:func:`_graph_trains`).
_TRAINS = "_npu_dump_hook_trains"
#: Keras ``Model`` methods that run the model without training (:meth:`SessionPatches._keras_inference`).
_KERAS_INFERENCE = ("predict", "predict_on_batch", "evaluate", "test_on_batch")  # the session ran a Saver restore (online inference, ._infer)
#: Op types the randomness policy edits: a session is wrapped before its first run of one.
_RANDOM_TYPES = STATEFUL_TYPES | frozenset(STATELESS_SEED_INPUT) | frozenset(SHUFFLE_SEED_INPUTS)
#: Variable-initialization checks (Keras's ``_initialize_variables``, ``report_uninitialized_variables``):
#: on a training graph a session is wrapped before its first run of one too (``_wrap_now``).
_INIT_CHECK_TYPES = frozenset(("VarIsInitializedOp", "IsVariableInitialized"))
#: TF 2.x control flow whose bodies are functions of the graph library (``trains``).
_FUNCTIONAL_CONTROL_FLOW = frozenset(("If", "StatelessIf", "While", "StatelessWhile"))


def trains(graph: Any) -> bool:
    """Whether ``graph`` holds an op that updates a trainable variable or the global step, or an
    optimizer update inside a TF 2.x ``cond``/``while_loop`` function body (a loss-scale optimizer
    applies its gradients in a ``cond`` on their being finite)."""
    from ..train.training_step import TrainingStepDetector

    # A run of every op executes every op: the update rule asked of each op directly, not through a
    # walk of the whole graph from all its ops (which only finds them all again: ~65 ms on TF 2.15).
    ops = graph.get_operations()
    return bool(TrainingStepDetector(graph).update_ops(ops)) or _updates_in_functions(graph, ops)


def _graph_trains(state: Dict[str, Any], graph: Any) -> bool:
    """``trains(graph)``, taken from the session's creation when that said yes (a graph never
    loses an op: its update ops are still there) or the graph has gained no op since
    (``Graph.version`` counts the ops made); a new answer reads every op of the graph again."""
    noted = state.get(_TRAINS)
    if noted is not None and (noted[1] or noted[0] == graph.version):
        return noted[1]
    return trains(graph)


def _updates_in_functions(graph: Any, ops: List[Any]) -> bool:
    from ..train.training_step import OPTIMIZER_UPDATE

    if not any(op.type in _FUNCTIONAL_CONTROL_FLOW for op in ops):
        return False  # no function body can run: spare serializing the graph
    library = graph.as_graph_def(add_shapes=False).library.function
    return any(OPTIMIZER_UPDATE.match(node.op) for function in library for node in function.node_def)


class SessionPatches(object):
    """The Session and Keras patches of :class:`~npu_dump_hook.runner._inject.Injection` (module docstring)."""

    def _patch_keras(self, module_name: str) -> None:
        """Keras ``Model.fit``/``train_on_batch`` called eagerly (the TF 2.x default) stop the script
        before training with one line saying what to do (status ``EXIT_NO_BUNDLE``); with
        allow_no_bundle a warning, and the script trains undumped. In graph mode they are untouched
        (their train function runs through the session: ``_patch_callables``)."""
        model = sys.modules[module_name].Model
        for name in ("fit", "train_on_batch"):
            set_patch(model, name, self._graph_mode_only(model.__dict__[name], "Keras Model." + name))
        for name in _KERAS_INFERENCE:  # not an online-inference entry point under mode auto (see below)
            if name in model.__dict__:
                set_patch(model, name, self._keras_inference(model.__dict__[name]))

    def _keras_inference(self, method: Callable[..., Any]) -> Callable[..., Any]:
        """Keras ``predict``/``evaluate`` run with ``_depth("keras_inference")``: under mode auto
        their runs never claim the hook as an inference iteration (a training script checks its
        model with ``predict`` before ``fit`` or ``model_to_estimator``, whose train function does
        not exist yet); ``mode="infer"`` dumps them."""
        injection = self

        @functools.wraps(method)
        def marked(self: Any, *args: Any, **kwargs: Any) -> Any:
            counter = getattr(injection.hook or injection._spare, "steps", None)
            held = counter is not None and not injection._depth("keras_inference")
            if held:
                counter.inference_held += 1  # a hook already bound counts by its own rule (train/steps.py)
            try:
                with injection._enter("keras_inference"):
                    return method(self, *args, **kwargs)
            finally:
                if held:
                    counter.inference_held -= 1

        return marked

    def _graph_mode_only(self, method: Callable[..., Any], what: str) -> Callable[..., Any]:
        injection = self

        @functools.wraps(method)
        def eager_checked(self: Any, *args: Any, **kwargs: Any) -> Any:
            if injection._open() and _tf.executing_eagerly_if_loaded():
                message = ("{} runs eagerly (the TF 2.x default): npu_dump_hook dumps graph-mode training only; "
                           "call tf.compat.v1.disable_eager_execution() at the top of the script".format(what))
                injection._stood_down = True
                if not injection.settings.allow_no_bundle:
                    print_error(message + " (nothing dumped; the script stops before training)")
                    raise SystemExit(EXIT_NO_BUNDLE)
                logger.warning("npu_dump_hook: %s (allow_no_bundle: it trains, nothing is dumped)", message)
            return method(self, *args, **kwargs)

        return eager_checked

    def _patch_sessions(self) -> None:
        base, session, interactive = _tf.session_classes()
        injection = self
        for cls in (session, interactive):
            set_patch(cls, "__init__", self._session_init(cls.__dict__["__init__"]))
        run, close, exit_ = base.__dict__["run"], base.__dict__["close"], session.__dict__["__exit__"]

        @functools.wraps(run)
        def run_(self: Any, fetches: Any, feed_dict: Any = None, options: Any = None, run_metadata: Any = None) -> Any:
            wrapper = injection._routed_wrapper(self, fetches, feed_dict)
            if wrapper is None and _PENDING in self.__dict__ and not injection._depth("routing"):
                self.__dict__[RUNS_BEFORE] = self.__dict__.get(RUNS_BEFORE, 0) + 1  # the wrapper warns of them
            if wrapper is None or injection._depth("routing") or threading.get_ident() != injection._thread:
                return run(self, fetches, feed_dict, options, run_metadata)  # input threads (queue runners) too
            return injection._route(wrapper.run, fetches, feed_dict=feed_dict, options=options,
                                    run_metadata=run_metadata)

        @functools.wraps(close)
        def close_(self: Any) -> None:
            wrapper = self.__dict__.get(_WRAPPER)
            if injection._forget(self.__dict__) is not None:
                logger.info("npu_dump_hook: a tf.compat.v1.Session made with the dump options was closed without "
                            "a training step or inference iteration: not dumped, its graph left as it was")
            if wrapper is None or injection._depth("routing"):
                return close(self)
            if not wrapper.finished and not wrapper.hook.counted_steps and injection.hook is wrapper.hook:
                injection._release(self, wrapper)
                try:
                    return close(self)
                finally:
                    injection._drop_run_folder(wrapper.hook)
            try:
                with injection._routing():
                    wrapper.finish()
            finally:
                close(self)

        @functools.wraps(exit_)
        def exit__(self: Any, exc_type: Any, exc_value: Any, exc_tb: Any) -> Any:
            wrapper = self.__dict__.get(_WRAPPER)
            if wrapper is not None and not ends_as_meant(exc_type):
                # the script failed, or a SIGTERM cut the hook's work short: no end(), no bundle
                # (MonitoredSession's contract); TF then closes the session in a thread of its own
                wrapper.abandon()
            return exit_(self, exc_type, exc_value, exc_tb)

        set_patch(base, "run", run_)
        set_patch(base, "close", close_)
        set_patch(session, "__exit__", exit__)
        self._patch_callables(base)

    def _patch_callables(self, base: type) -> None:
        """``make_callable`` and ``_make_callable_from_options`` (Keras's graph-mode train function,
        TF 1.15 and 2.x): a callable of a wrapped session's thread runs through its wrapper
        (:class:`~npu_dump_hook.session.RoutedCallable`), as ``run`` does."""
        injection = self
        make, make_from_options = base.__dict__["make_callable"], base.__dict__["_make_callable_from_options"]

        @functools.wraps(make)
        def make_callable(self: Any, fetches: Any, feed_list: Any = None, accept_options: bool = False) -> Any:
            own = functools.partial(make, self, fetches, feed_list, accept_options)
            wrapper = injection._routed_wrapper(self, fetches, dict.fromkeys(feed_list or ()))
            if wrapper is None:
                return own()
            from ..session import RoutedCallable

            routed = RoutedCallable(wrapper, own, fetches=fetches, feeds=list(feed_list or []))
            return injection._routed_callable(routed)

        @functools.wraps(make_from_options)
        def _make_callable_from_options(self: Any, callable_options: Any) -> Any:
            own = functools.partial(make_from_options, self, callable_options)
            wrapper = injection._routed_wrapper(self, *_callable_run(self.graph, callable_options))
            if wrapper is None:
                return own()
            return injection._routed_callable(wrapper._make_callable_from_options(callable_options, own))

        set_patch(base, "make_callable", make_callable)
        set_patch(base, "_make_callable_from_options", _make_callable_from_options)

    def _routed_wrapper(self, session: Any, fetches: Any, feed_dict: Any) -> Any:
        """The wrapper of ``session`` (wrapped now if this run is its first training step), or None."""
        state = session.__dict__
        wrapper = state.get(_WRAPPER)
        if wrapper is None and _PENDING in state and not self._depth("routing"):
            wrapper = self._wrap_at_training_run(session, fetches, feed_dict)
        return wrapper

    def _routed_callable(self, routed: Any) -> Callable[..., Any]:
        """``routed`` (a RoutedCallable) for calls of the wrapped session's thread, its session's own
        callable for others (input threads) and for the hook's own runs."""
        injection = self
        made_by = self._thread

        def call(*args: Any, **kwargs: Any) -> Any:
            if injection._depth("routing") or threading.get_ident() != made_by:
                return routed.bare(*args, **kwargs)
            return injection._route(routed, *args, **kwargs)

        return call

    def _route(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A run of the wrapped session through its wrapper; stop="exit" ends the script after the dumped steps."""
        wrapper = self._wrapper
        with self._routing():
            result = function(*args, **kwargs)
        if wrapper.finished and self.settings.stop == "exit":
            logger.info("npu_dump_hook: the dumped step(s) are done: the script ends with status 0 (stop=exit)")
            raise SystemExit(0)
        return result

    def _session_init(self, original: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(original)
        injection = self

        @functools.wraps(original)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            if not injection._open() or injection._depth("monitored"):
                return original(self, *args, **kwargs)
            bound = signature.bind(self, *args, **kwargs)
            graph = bound.arguments.get("graph")
            if graph is None:
                graph = _tf.tf_v1().get_default_graph()
            claim = None
            noted = (graph.version, trains(graph)) if not graph.finalized else None
            if noted is not None and (noted[1] or wants_inference(injection.settings)):
                try:
                    claim = injection._reserve(bound.arguments.get("config"))
                except SystemExit:  # the settings do not fit: leave a whole session behind, then stop
                    original(self, *args, **kwargs)
                    raise
                bound.arguments["config"] = claim[1]
            original(*bound.args, **bound.kwargs)
            if not graph.finalized:  # wrapped at its first training run (a reserved hook: with its config)
                self.__dict__[_PENDING] = claim[0] if claim is not None else None
                self.__dict__[RUNS_BEFORE] = 0  # counted by run_: the wrapper needs no probe run of its own
                self.__dict__[_TRAINS] = noted

        return __init__

    def _wrap_at_training_run(self, session: Any, fetches: Any, feed_dict: Any) -> Any:
        """A session not wrapped yet (``_PENDING``): wrapped at its first run that is a training
        step (:mod:`npu_dump_hook.train.training_step`) or, on a graph with training ops, that
        executes a random op (an initializer, dropout in ``sess.run(cost)``, a shuffling input
        pipeline) or a variable-initialization check (Keras's, right before its initializer run), so the randomness policy edits the graph before those ops run; with mode
        auto/infer also at its first inference run (:mod:`._infer`: the model on an input batch,
        after restores, initializers and warm-up runs). A session that does none of these (the
        checkpoint-saving session of ``model_to_estimator``: ``set_weights`` and ``save``) keeps
        its graph as it is."""
        state = session.__dict__
        if state[_PENDING] is None and not self._open():
            return self._forget(state)
        if session.graph.finalized:
            return self._forget(state)
        explicit = self.settings.hook_options.get("mode") == "infer"
        verdict = run_verdict(session.graph, fetches, feed_dict) if wants_inference(self.settings) else None
        restored = restored_mark(session, verdict, _RESTORED)
        inference = verdict is not None and verdict.iteration and (explicit or not self._depth("keras_inference"))
        may_train = (not explicit and not restored
                     and not (verdict is not None and verdict.restore))
        training = may_train and self._wrap_now(session, fetches, feed_dict)
        if not (training or inference):
            return None  # looked at again at its next run
        hook = self._forget(state) or self._spare
        if hook is None:
            claim = self._claim("Session", None)
            if claim is None:
                return None
            self._no_config("the tf.compat.v1.Session made before its graph {}".format(
                "had training ops" if training else "was run for inference"))
            hook = claim[0]
        elif not self._bind(hook, "Session"):
            return None
        return self._wrap(session, hook)

    @staticmethod
    def _forget(state: Dict[str, Any]) -> Any:
        state.pop(_DETECTOR, None)
        state.pop(_TRAINS, None)
        return state.pop(_PENDING, None)

    @staticmethod
    def _wrap_now(session: Any, fetches: Any, feed_dict: Any) -> bool:
        """Whether a run of ``fetches`` with ``feed_dict`` on ``session`` trains, or runs random ops
        on a training graph."""
        from ..train.training_step import TrainingStepDetector

        state = session.__dict__
        detector = state.get(_DETECTOR)
        if detector is None:
            detector = state[_DETECTOR] = TrainingStepDetector(session.graph)
        try:
            walk = detector.walk(fetches, feed_dict)
            if detector.verdict_for(walk).training:
                return True
            if not state.get(RUNS_BEFORE) and _graph_trains(state, session.graph):
                # Its first run, on a training graph: TensorFlow takes in every op of the graph now
                # and ignores later edits, so the hook begins before it (an initializer of constants
                # would otherwise void the strip of the dropout that runs in the training step).
                return True
            # An initialization check (Keras's, before its initializer run) is also the last run
            # before the graph edits: TensorFlow sends a session every op of its graph at its first
            # run and ignores later edits of those ops, so wrapping at the initializer run would
            # leave the randomness policy and the emulated numerics without effect.
            claims = _RANDOM_TYPES | _INIT_CHECK_TYPES
            return any(op.type in claims for op in walk.ran.values()) and _graph_trains(state, session.graph)
        except Exception:  # noqa: BLE001 - fetches TensorFlow itself rejects: its run raises, not ours
            return False

    def _release(self, session: Any, wrapper: Any) -> None:
        """``session`` closes without a training step: its hook is dropped unused (no bundle), so the
        script's training (``Estimator.train`` after ``model_to_estimator``) gets a new one."""
        wrapper.abandon()
        session.__dict__.pop(_WRAPPER, None)
        with self._lock:  # the checkpoint redirection stays: what the session saved is the script's to load
            self.hook = self.claimed_by = self._spare = self._wrapper = self._thread = None
        logger.info("npu_dump_hook: a tf.compat.v1.Session was closed without a training step: its hook is "
                    "dropped (run folder %s, no bundle); the next training entry point gets a new one",
                    wrapper.hook.run_dir)

    def _drop_run_folder(self, hook: Any) -> None:
        """The dropped hook's DUMP_GRAPH_PATH unset, and its run folder removed unless checkpoints were saved there."""
        hook.dump.end()
        redirect = self._redirect
        if redirect is None or not os.path.isdir(os.path.join(hook.run_dir, os.path.basename(redirect.root))):
            shutil.rmtree(hook.run_dir, ignore_errors=True)  # its own folder, nothing in it to keep

    def _wrap(self, session: Any, hook: Any) -> Any:
        from ..session import NpuDumpSession

        with self._routing():  # begin() and after_create_session() run the bare session
            wrapper = NpuDumpSession(session, hook=hook, stop="continue")
        session.__dict__[_WRAPPER] = wrapper
        self._wrapper, self._thread = wrapper, threading.get_ident()
        return wrapper


def _callable_run(graph: Any, callable_options: Any) -> Tuple[List[Any], Dict[Any, None]]:
    """``(fetches, feed_dict keys)`` of a run the ``CallableOptions`` describe (its fetches and targets)."""
    try:
        names = list(callable_options.fetch) + list(callable_options.target)
        fetches = [graph.as_graph_element(name) for name in names]
        return fetches, dict.fromkeys(graph.as_graph_element(name) for name in callable_options.feed)
    except (KeyError, ValueError, TypeError):  # names TensorFlow rejects when it makes the callable
        return [], {}


def set_patch(cls: Any, name: str, function: Callable[..., Any]) -> None:
    """``cls.name = function`` (a class, or a module for its functions), once."""
    function._npu_dump_hook_patch = True  # type: ignore[attr-defined]
    if not getattr(cls.__dict__.get(name), "_npu_dump_hook_patch", False):
        setattr(cls, name, function)
