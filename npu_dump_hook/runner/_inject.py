"""The TensorFlow patches of the runner and the one hook they hand out (:class:`Injection`).

:func:`~npu_dump_hook.runner.install` makes one :class:`Injection` per process and calls
:meth:`Injection.patch` for each of the TensorFlow modules it patches once it has loaded. The
first training entry point the script reaches claims the process's one
:class:`~npu_dump_hook.hook.NpuDumpHook` (:meth:`Injection._claim`)::

    Estimator.train(...)          hooks += [hook]; the session config carries the dump options
                                  for this call, unless it has its own; the estimator trains in
                                  {run folder}/model_dir (unless keep_checkpoints; a golden run
                                  always, not seeded from model_dir)
    MonitoredTrainingSession(...) claims the hook for the MonitoredSession it makes (below), then
                                  points its checkpoint_dir at the run folder (._checkpoints)
    MonitoredSession(...)         made by the script on a graph with training ops: hooks +=
                                  [hook]; its session creator makes its session with the dump options
    tf.compat.v1.Session(...)     made by the script (not by a monitored session) on a graph with
                                  training ops: config += dump options (the hook reserved,
                                  :meth:`Injection._reserve`); at its first training run (also
                                  through its callables: Keras) the hook is bound and it is wrapped
                                  as NpuDumpSession(stop="continue") for the runs of that thread
                                  (:mod:`._sessions`); settings.stop="exit" ends the script with
                                  status 0 after the dumped steps
    Estimator.predict/evaluate,   online inference (mode auto/infer, nothing trained first): the
    inference sessions            hook for the pass, a session at its first inference run, a
                                  MonitoredSession on a graph without training ops (._infer)

Once a hook exists nothing else is injected, and the script's checkpoints (Saver.save,
CheckpointSaverHook, MonitoredTrainingSession) go to the run folder (:mod:`._checkpoints`); a
script that imports NpuDumpHook or NpuDumpSession itself gets nothing (its own hook decides). :meth:`Injection.finish` and
:meth:`Injection.announce` end the run after the script (see :mod:`npu_dump_hook.runner`).
Nothing here imports TensorFlow: the patches run once the script has loaded it.
"""
import functools
import inspect
import logging
import os
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import _tf
from .._cli_conventions import EXIT_SCRIPT_ERROR, EXIT_USAGE, print_error
from ..constants import ENV_OPTIONS, NPU_OPTIMIZER_NAME
from ..errors import NpuDumpError, OptionError
from ..options import DumpOptions
from ._notice import BundleNotice
from ._infer import estimator_entry, wants_inference
from ._heap import HeapFreeze, release_after_bundle
from ._checkpoints import SAVER_HOOK_MODULE, SAVER_MODULE, CheckpointRedirect, redirecting_begin, redirecting_save
from ._sessions import SessionPatches, set_patch, trains
from ._settings import RunSettings, as_given

__all__ = ["Injection"]

logger = logging.getLogger("npu_dump_hook.runner")

_EAGER_HINT = ("; TensorFlow runs eagerly (the TF 2.x default), which npu_dump_hook cannot dump: call "
               "tf.compat.v1.disable_eager_execution() at the top of the script")


def _script_words() -> List[str]:
    """The script's words after ``python`` as the user typed them: ``[SCRIPT, ARGS...]``, or
    ``["-m", MODULE, ARGS...]`` when ``__main__`` was run as a module."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    head = ["-m", spec.name] if spec is not None else sys.argv[:1]
    return head + sys.argv[1:]


def _redirect_model_dir(estimator: Any, run_dir: str, seed: bool = True) -> None:
    """Point ``estimator`` at ``{run folder}/model_dir`` for the rest of the process.

    The dump run's step-1 checkpoint then lands in the run folder instead of the script's
    ``model_dir`` (where the next real training run would resume from it), while the script's
    own later ``evaluate``/``predict``/``get_variable_value`` calls still find it. With ``seed``
    the new folder starts from the latest checkpoint of ``model_dir``
    (:func:`~npu_dump_hook.config.dump_run_model_dir`); without (a golden run: the hook
    restores the NPU bundle) it starts empty.
    """
    from ..config import dump_run_model_dir

    run_config = _tf.estimator_run_config(estimator)
    target = os.path.join(run_dir, "model_dir")
    if seed:
        target = dump_run_model_dir(run_config.model_dir, target)
    else:
        logger.warning("npu_dump_hook: the Estimator trains in %s for this golden run, from the NPU bundle's state; "
                       "%s is left as it was", target, run_config.model_dir or "its temporary model_dir")
    if run_config.model_dir != target:
        _tf.set_estimator_model_dir(estimator, run_config.replace(model_dir=target), target)


def _script_dump_options(config: Any) -> Optional[DumpOptions]:
    """The dump options a script's own ``ConfigProto`` switches on (its ``NpuOptimizer``
    entries, the last holding a key winning, as the adapter reads them); None when it switches
    neither the data dump nor the overflow check on."""
    if config is None:
        return None
    params = {}  # type: Dict[str, Any]
    for entry in config.graph_options.rewrite_options.custom_optimizers:
        if entry.name == NPU_OPTIMIZER_NAME:
            params.update(entry.parameter_map.items())

    def flag(key: str) -> bool:
        return key in params and bool(params[key].b)

    def text(key: str) -> Optional[str]:
        return params[key].s.decode("utf-8") if key in params and params[key].s else None

    if not (flag("enable_dump") or flag("enable_dump_debug")):
        return None
    kwargs = {"enable_dump": flag("enable_dump"), "enable_dump_debug": flag("enable_dump_debug")}  # type: Dict[str, Any]
    for key in ("dump_path", "dump_step", "dump_mode", "dump_layer", "dump_data", "dump_debug_mode"):
        if text(key) is not None:
            kwargs[key] = text(key)
    return DumpOptions(**kwargs)


def _notice_after_end(hook: Any, notice: BundleNotice, heap: HeapFreeze) -> None:
    """The hook's ``end()`` (which writes the bundle) then the path printed at once, so a script
    leaving by ``os._exit`` after training still shows it; the heap frozen for the dump's window
    is thawed then (module _heap), whether ``end()`` succeeded or not, and the caches that only
    served the bundle are dropped once it is written (``release_after_bundle``)."""
    end = hook.end

    def end_then_notice(*args: Any, **kwargs: Any) -> None:
        try:
            end(*args, **kwargs)
        finally:
            heap.thaw()
        bundle = getattr(hook, "bundle", None)
        notice.written(bundle.location if bundle is not None else None)
        if bundle is not None:
            release_after_bundle(hook)

    hook.end = end_then_notice


class Injection(SessionPatches):
    """The patches of one process and the one hook they hand out (see the module docstring)."""

    def __init__(self, settings: RunSettings) -> None:
        self.settings = settings
        #: The process's NpuDumpHook, once a training entry point has claimed it.
        self.hook = None  # type: Any
        #: Which entry point got it: "Estimator.train", "MonitoredSession" or "Session".
        self.claimed_by = None  # type: Optional[str]
        self._wrapper = None  # type: Any
        self._thread = None  # type: Optional[int]  # the thread whose runs go through the wrapper
        self._monitored = None  # type: Any
        self._stood_down = False
        self._announced = False
        self.announced_bundle = None  # type: Optional[str]  # the path announce() found (own or a forked child's)
        self._hook_module_is_ours = False
        self._redirect = None  # type: Optional[CheckpointRedirect]
        self._spare = None  # type: Any  # the hook made by _reserve, bound by the first training entry point
        self._spare_pid = None  # type: Optional[int]  # the process that made it
        self._lock = threading.RLock()
        self._local = threading.local()
        self.notice = BundleNotice()  # the bundle path printed when written (module _notice)
        #: The objects made before the hook, out of the collector's walks until its end() (module _heap).
        self.heap = HeapFreeze()

    # -- what the script ends with ---------------------------------------------------------
    @property
    def bundle_location(self) -> Optional[str]:
        """Where the hook wrote its bundle; None before (or without) one."""
        bundle = getattr(self.hook, "bundle", None)
        return bundle.location if bundle is not None else None

    def finish(self) -> None:
        """Collect what the script left pending: a wrapped session whose steps did not end the
        run, or a monitored session left open (its hook's ``end()``)."""
        try:
            self._finish()
        finally:
            self.heap.thaw()

    def _finish(self) -> None:
        hook = self.hook
        if hook is None:
            self._drop_unused_spare()
        if hook is None or not hook.counted_steps:
            return
        if self._wrapper is not None and not self._wrapper.finished:
            with self._routing():
                self._wrapper.finish()
        if self._monitored is not None and hook.record is None:
            logger.info("npu_dump_hook: closing the MonitoredSession the script left open")
            self._monitored.close()

    def _drop_unused_spare(self) -> None:
        """The hook reserved for a session that never trained nor ran an inference iteration (with
        mode auto/infer every session the script makes reserves it): its run folder, and the bundle
        folder when that stayed empty, are removed (by the process that made them only)."""
        spare, self._spare = self._spare, None
        if spare is None or self._spare_pid != os.getpid():
            return
        self._drop_run_folder(spare)
        try:
            os.rmdir(spare.bundle_dir)  # only when empty: another run's bundles stay
        except OSError:
            pass

    def announce(self, explain: bool = True) -> None:
        """Print the bundle path as the last line on stdout (once per process) unless it already is
        (printed when the bundle was written, nothing printed since); a bundle a forked child of
        the script wrote counts too. Without a bundle, with ``explain``, say why there is none
        when one was expected."""
        if self._announced:
            return
        self._announced = True
        location = self.notice.last_line(self.bundle_location)
        self.announced_bundle = location or self.notice.printed  # a forked child's bundle counts too
        if location is not None:
            try:
                sys.stdout.flush()
                print(location)
                sys.stdout.flush()
            except (OSError, ValueError):  # stdout closed by its reader (| head) or by the script
                pass
            self.notice.printed_last(location)
        elif self.notice.printed is not None:
            self.notice.printed_last(self.notice.printed)
        elif explain and self.notice.printed is None:
            self._report()

    @property
    def bundle_missing(self) -> bool:
        """The script ended without the bundle the run asked for (``EXIT_NO_BUNDLE``, unless allow_no_bundle)."""
        if self._stood_down or not self.settings.enabled or self.settings.allow_no_bundle:
            return False
        if self.bundle_location is not None or self.announced_bundle is not None:
            return False
        return self.hook is None or bool(self.hook.collect)

    def _report(self) -> None:
        if self._stood_down or not self.settings.enabled:
            return
        if self.hook is None:
            logger.warning("npu_dump_hook: no training was seen, nor inference (Estimator.train/predict/evaluate, "
                           "MonitoredSession, Keras fit/train_on_batch in graph mode or a tf.compat.v1.Session "
                           "running training ops or the model on an input batch): nothing was dumped%s",
                           _EAGER_HINT if _tf.executing_eagerly_if_loaded() else "")
        elif self.hook.dumping and self.hook.collect:
            logger.warning("npu_dump_hook: no bundle was written (%d training step(s) ran; run folder %s)",
                           len(self.hook.counted_steps), self.hook.run_dir)

    # -- claiming the one hook -------------------------------------------------------------
    def _open(self) -> bool:
        """Whether a training entry point may still get the hook."""
        if self.hook is not None or self._stood_down or not self.settings.enabled:
            return False
        if not self._hook_module_is_ours and "npu_dump_hook.hook" in sys.modules:
            self._stood_down = True
            logger.warning("npu_dump_hook: the script uses npu_dump_hook itself (NpuDumpHook or "
                           "NpuDumpSession): nothing injected, its own hook decides what is dumped")
            return False
        return True

    def _claim(self, where: str, config: Any) -> Optional[Tuple[Any, Any]]:
        """``(hook, config carrying its dump options)`` for the first caller, else None
        (:meth:`_reserve`, then :meth:`_bind`)."""
        with self._lock:
            if not self._open():
                return None
            claim = self._reserve(config)
            self._bind(claim[0], where)
        return claim

    def _reserve(self, config: Any) -> Tuple[Any, Any]:
        """``(hook, config carrying its dump options)``, the hook made once and not yet bound: a
        session on a training graph gets the config now and the hook at its first training run.

        A ``config`` that switches the NPU dump on itself is kept, and its options become the
        hook's; otherwise the hook's options are written into a copy (``session_config``).
        """
        with self._lock:
            own = _script_dump_options(config)
            if self._spare is None:
                self._hook_module_is_ours = True
                self.heap.freeze()  # before the package's training modules load: TF and the graph are made
                from ..hook import NpuDumpHook  # TensorFlow is loaded: the script is training
                from ..train.report import RERUN_COMMAND

                try:
                    hook = NpuDumpHook(own if own is not None else self.settings.options, **self.settings.hook_options)
                except NpuDumpError as exc:  # the settings do not fit this run: stop as a bad variable does
                    self._stood_down = True
                    print_error(as_given(exc))
                    raise SystemExit(EXIT_USAGE if isinstance(exc, OptionError) else EXIT_SCRIPT_ERROR)
                setattr(hook, RERUN_COMMAND, _script_words())  # the golden-run hint names the CLI command
                _notice_after_end(hook, self.notice, self.heap)
                hook.warn_if_never_began = False  # _report says it when no training was seen
                self._spare, self._spare_pid = hook, os.getpid()
            hook = self._spare
        if own is not None:
            if self.settings.options is not None or any(var in os.environ for var in ENV_OPTIONS.values()):
                logger.warning("npu_dump_hook: the script's session config sets its own NPU dump options "
                               "(dump_path %s): they are used, not NPU_DUMP_*", own.dump_path)
            return hook, config
        from ..config import session_config

        return hook, session_config(hook.options, config, ranks=self.settings.hook_options.get("ranks"))

    def _bind(self, hook: Any, where: str) -> bool:
        """Make the reserved ``hook`` the process's, for ``where``; False when it is taken or the runner stood down."""
        with self._lock:
            if not self._open():
                return False
            self.hook, self.claimed_by = hook, where
        logger.info("npu_dump_hook: %s gets the NpuDumpHook (run folder %s)", where, hook.run_dir)
        return True

    def parts_at_work(self) -> Tuple[Any, ...]:
        """The objects whose methods do the runner's work inside the script's calls: this
        injection, its hook (bound or reserved), the session wrapper and the checkpoint redirect.
        An error raised below one of their methods is the hook's own (:mod:`._child`)."""
        parts = (self, self.hook, self._spare, self._wrapper, self._redirect)
        return tuple(part for part in parts if part is not None)

    @property
    def golden(self) -> bool:
        """Whether the process's hook makes a golden run (``initial_state``)."""
        return getattr(self.hook, "target", None) is not None

    def checkpoints(self) -> Optional[CheckpointRedirect]:
        """Where the script's checkpoints go once the hook exists: the run folder
        (:mod:`._checkpoints`); None before the hook, and in a dump run with keep_checkpoints.
        Also None while the hook's plain session has not trained: what a session saves before its
        first training step is the script's own state (``model_to_estimator`` saves the Keras
        weights where its Estimator warm-starts from, a path TF 1.15 does not take back from
        ``save``), and that session may drop its hook unused (:meth:`SessionPatches._release`)."""
        if self._redirect is None and self.claimed_by == "Session" and not self.hook.counted_steps:
            return None
        if self._redirect is None and self.hook is not None:
            with self._lock:
                if self._redirect is None and (self.golden or not self.settings.keep_checkpoints):
                    if self.golden and self.settings.keep_checkpoints:
                        logger.warning("npu_dump_hook: keep_checkpoints is ignored in a golden run: its checkpoints "
                                       "(the NPU bundle's state) never go into the script's folders")
                    self._redirect = CheckpointRedirect(self.hook.run_dir, self.golden)
        return self._redirect

    def _no_config(self, what: str) -> None:
        if self.hook.backend_name == "npu":
            logger.warning("npu_dump_hook: %s: the dump options could not be put into its session config, "
                           "so GE dumps only what the script's own config asks", what)

    # -- re-entrancy: the hook's own session runs, and sessions made by monitored sessions -----
    def _depth(self, name: str) -> int:
        return getattr(self._local, name, 0)

    def _enter(self, name: str) -> "_Depth":
        return _Depth(self._local, name)

    def _routing(self) -> "_Depth":
        return self._enter("routing")

    # -- patching -------------------------------------------------------------------------
    def patch(self, module_name: str) -> None:
        """Patch what ``module_name`` (one of the ``_tf.*_MODULE`` names) defines."""
        if module_name in _tf.KERAS_TRAINING_MODULES:
            return self._patch_keras(module_name)
        {_tf.SESSION_MODULE: self._patch_sessions, _tf.MONITORED_SESSION_MODULE: self._patch_monitored,
         _tf.ESTIMATOR_MODULE: self._patch_estimator, SAVER_MODULE: self._patch_saver,
         SAVER_HOOK_MODULE: self._patch_saver_hook}[module_name]()

    def _patch_saver(self) -> None:
        saver = sys.modules[SAVER_MODULE].Saver  # loaded: the import hook calls this after its code ran
        set_patch(saver, "save", redirecting_save(saver.__dict__["save"], self.checkpoints))

    def _patch_saver_hook(self) -> None:
        hook = sys.modules[SAVER_HOOK_MODULE].CheckpointSaverHook
        set_patch(hook, "begin", redirecting_begin(hook.__dict__["begin"], self.checkpoints))

    def _patch_estimator(self) -> None:
        estimator = _tf.estimator_class()
        original = estimator.__dict__["train"]
        signature = inspect.signature(original)
        injection = self

        @functools.wraps(original)
        def train(self: Any, *args: Any, **kwargs: Any) -> Any:
            config = _tf.estimator_session_config(self)
            claim = injection._claim("Estimator.train", config)
            if claim is None:
                return original(self, *args, **kwargs)
            hook, merged = claim
            bound = signature.bind(self, *args, **kwargs)
            bound.arguments["hooks"] = list(bound.arguments.get("hooks") or []) + [hook]
            _tf.set_estimator_session_config(self, merged)
            if injection.checkpoints() is not None:
                _redirect_model_dir(self, hook.run_dir, seed=not injection.golden)
            setattr(self, _SCRIPT_SESSION_CONFIG, config)  # evaluations inside train() use it (below)
            try:
                return original(*bound.args, **bound.kwargs)
            finally:
                delattr(self, _SCRIPT_SESSION_CONFIG)
                _tf.set_estimator_session_config(self, config)  # evaluate/predict keep the script's config

        set_patch(estimator, "train", train)
        for name in ("evaluate", "predict"):  # an inference pass when nothing trains first (._infer)
            set_patch(estimator, name, estimator_entry(self, name, _without_dump_keys(estimator.__dict__[name])))

    def _patch_monitored(self) -> None:
        base, coordinated, creators = _tf.monitored_session_classes()
        original = base.__dict__["__init__"]
        signature = inspect.signature(original)
        injection = self

        @functools.wraps(original)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            bound = signature.bind(self, *args, **kwargs)
            claim = injection._local.__dict__.pop("claimed", None)  # by MonitoredTrainingSession, for this one
            graph = _tf.tf_v1().get_default_graph()
            if claim is not None or (injection._open() and injection._monitored_wanted(graph)):
                creator = bound.arguments.get("session_creator")
                known = creator is None or isinstance(creator, creators)
                config = _tf.session_creator_config(creator) if creator is not None else None
                claim = claim or injection._claim("MonitoredSession", config)
                if claim is not None:
                    hook, merged = claim
                    bound.arguments["hooks"] = list(bound.arguments.get("hooks") or []) + [hook]
                    if creator is None:
                        bound.arguments["session_creator"] = creators[0](config=merged)
                    elif known:
                        bound.arguments["session_creator"] = _tf.with_session_creator_config(creator, merged)
                    else:
                        injection._no_config("the MonitoredSession's own {}".format(type(creator).__name__))
            with injection._enter("monitored"):
                original(*bound.args, **bound.kwargs)
            if claim is not None:
                injection._monitored = self

        set_patch(base, "__init__", __init__)
        self._patch_training_session()
        if coordinated is not None:  # recovery sessions are made there too, later
            create = coordinated.__dict__["create_session"]

            @functools.wraps(create)
            def create_session(self: Any, *args: Any, **kwargs: Any) -> Any:
                with injection._enter("monitored"):
                    return create(self, *args, **kwargs)

            set_patch(coordinated, "create_session", create_session)

    def _patch_training_session(self) -> None:
        """``MonitoredTrainingSession`` claims the hook before it makes its checkpoint and summary
        hooks, so its checkpoint_dir can point at the run folder; the MonitoredSession it then
        makes gets the claimed hook as the script's own MonitoredSession would."""
        module = sys.modules[_tf.MONITORED_SESSION_MODULE]
        original = module.__dict__["MonitoredTrainingSession"]
        signature = inspect.signature(original)
        injection = self

        @functools.wraps(original)
        def MonitoredTrainingSession(*args: Any, **kwargs: Any) -> Any:  # noqa: N802 - TF's name
            bound = signature.bind(*args, **kwargs)
            if injection._open() and trains(_tf.tf_v1().get_default_graph()):
                injection._local.claimed = injection._claim("MonitoredSession", bound.arguments.get("config"))
            redirect = injection.checkpoints()
            if redirect is not None:
                redirect.training_session(bound.arguments)
            try:
                return original(*bound.args, **bound.kwargs)
            finally:
                injection._local.__dict__.pop("claimed", None)

        set_patch(module, "MonitoredTrainingSession", MonitoredTrainingSession)

    def _monitored_wanted(self, graph: Any) -> bool:
        """A MonitoredSession made by the script claims the hook: on a graph with training ops, or
        (mode auto/infer) on one without (an inference or evaluation loop)."""
        return trains(graph) or wants_inference(self.settings)

class _Depth(object):
    """A per-thread nesting counter, as a context manager."""

    def __init__(self, local: threading.local, name: str) -> None:
        self.local, self.name = local, name

    def __enter__(self) -> None:
        setattr(self.local, self.name, getattr(self.local, self.name, 0) + 1)

    def __exit__(self, *exc: Any) -> None:
        setattr(self.local, self.name, getattr(self.local, self.name) - 1)


#: Set on an Estimator while its hooked train() runs: the session config the script gave it.
_SCRIPT_SESSION_CONFIG = "_npu_dump_hook_script_session_config"


def _without_dump_keys(method: Callable[..., Any]) -> Callable[..., Any]:
    """``Estimator.evaluate``/``predict`` that, when called inside a hooked ``train()`` (as
    ``train_and_evaluate`` does after each checkpoint), build their session from the script's
    own config, so on an NPU the evaluation graph is not dumped into the training dump."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not hasattr(self, _SCRIPT_SESSION_CONFIG):
            return method(self, *args, **kwargs)
        during_train = _tf.estimator_session_config(self)
        _tf.set_estimator_session_config(self, getattr(self, _SCRIPT_SESSION_CONFIG))
        try:
            return method(self, *args, **kwargs)
        finally:
            _tf.set_estimator_session_config(self, during_train)

    return wrapper
