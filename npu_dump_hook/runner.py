"""Run an unmodified training script with one :class:`~npu_dump_hook.hook.NpuDumpHook` injected.

``npu-dump-hook run [options] -- python train.py ARGS`` starts a child interpreter with
:func:`bootstrap_command`; CI wrappers can start it themselves::

    python -m npu_dump_hook.runner [--] train.py ARGS      # or: -m package.module ARGS

Options come from the environment: ``NPU_DUMP_*`` (the dump options, read by
:meth:`DumpOptions.from_env`) and ``NPU_DUMP_HOOK_*`` (the hook's keywords, the stop mode, the
log level; listed in :mod:`npu_dump_hook.constants`), which the command line's flags set.

Call order in the child::

    main(argv)
      RunSettings.from_env()        every variable checked before the script starts (exit 2)
      install(settings)             TensorFlow is not imported: a finder on sys.meta_path waits
                                    for three of its modules and patches each once it has loaded
                                    (at once if it is loaded already):
          _tf.SESSION_MODULE            Session/InteractiveSession.__init__, Session.__exit__,
                                        BaseSession.run and BaseSession.close
          _tf.MONITORED_SESSION_MODULE  _MonitoredSession.__init__ (MonitoredSession, Singular-
                                        MonitoredSession, MonitoredTrainingSession) and the
                                        session creation inside it
          _tf.ESTIMATOR_MODULE          Estimator.train (and so NPUEstimator's)
      the script runs as __main__   as ``python SCRIPT`` runs it: its code compiled and run in a
                                    new __main__ module (runpy.run_path cannot: it sets argv[0]
                                    to __file__), sys.argv = [SCRIPT as typed, ARGS...],
                                    sys.path[0] = its folder, __file__ as typed on 3.7 and
                                    absolute from 3.9; a folder or zip with __main__.py through
                                    runpy.run_path, -m MODULE through runpy.run_module
        the first training entry point the script reaches gets the process's one hook:
          Estimator.train(...)          hooks += [hook]; the estimator's session config carries
                                        the dump options for this call (session_config()),
                                        unless it has its own NPU dump options; from then on
                                        it trains in {run folder}/model_dir, seeded with the
                                        latest checkpoint of its model_dir (which stays as it
                                        was), unless NPU_DUMP_HOOK_KEEP_CHECKPOINTS=1
          MonitoredSession(...) made by the script (not by an Estimator), on a graph with
                                        training ops: hooks += [hook]; its Chief/Worker session
                                        creator makes its session with the dump options
          tf.compat.v1.Session(...) made by the script (not by a monitored session: those come
                                        from _CoordinatedSessionCreator.create_session, on a
                                        finalized graph), on a graph with training ops (else
                                        decided at its first run): config += dump options;
                                        wrapped as NpuDumpSession(stop="continue") for the runs
                                        of the thread that made it (not queue-runner threads);
                                        after the dumped steps the bundle is written and, with
                                        stop="exit" (default), SystemExit(0) ends the script
        once a hook exists nothing else is injected; a script that imports NpuDumpHook or
        NpuDumpSession itself gets nothing injected (its own hook decides)
      finish()                      the script returned or exited: a wrapped session whose
                                    steps did not end the run is collected, a monitored
                                    session left open is closed (its hook's end())
      print(bundle path)            the last line on stdout, when a bundle was written
      exit status                   the script's: its SystemExit passes through; an uncaught
                                    exception is printed by sys.excepthook without the
                                    runner's frames, status 1

Only ``tf.compat.v1`` graph-mode training is seen: Keras ``fit``, ``Session.make_callable``
and eager code are not hooked. What a script's own session config holds wins: when it
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
import atexit
import functools
import importlib
import importlib.machinery
import importlib.util
import inspect
import io
import logging
import os
import runpy
import sys
import tempfile
import threading
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from . import _tf
from .constants import (
    ARCHIVES,
    BACKEND_CHOICES,
    CHECKSUMS,
    ENV_OPTIONS,
    ENV_RUN,
    ENV_RUN_HOOK_OPTIONS,
    ENV_RUN_KEEP_CHECKPOINTS,
    ENV_RUN_LOG_LEVEL,
    ENV_RUN_STOP,
    FAULT_OP_SEPARATOR,
    FAULTS_SEPARATOR,
    LINK_MODES,
    ON_MISMATCH,
    NPU_OPTIMIZER_NAME,
    STOP_MODES,
)
from .errors import NpuDumpError, OptionError
from .options import DumpOptions, parse_flag

__all__ = ["RunSettings", "Injection", "install", "installed", "start", "site_dir", "bootstrap_command", "main",
           "PROG", "parse_faults", "format_faults"]

logger = logging.getLogger(__name__)

PROG = "npu-dump-hook"
#: The command line's usage-error status (npu_dump_hook.cli._exit.EXIT_USAGE): a bad variable.
EXIT_USAGE = 2
EXIT_FAILED = 1

_USAGE = ("usage: python -m npu_dump_hook.runner [--] SCRIPT [ARGS...] | -m MODULE [ARGS...] | --pythonpath\n"
          "(options: NPU_DUMP_* and NPU_DUMP_HOOK_* variables, see npu_dump_hook/constants.py)")
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# attributes the runner sets on the tf.compat.v1.Session objects of the script
_WRAPPER = "_npu_dump_hook_wrapper"
_CANDIDATE = "_npu_dump_hook_candidate"


# --------------------------------------------------------------------------- settings


_flag = parse_flag  # the same on/off rule as DumpOptions.from_env


def _integer(minimum: Optional[int]) -> Callable[[str, str], int]:
    def parse(var: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise OptionError(var, raw, "must be an integer") from None
        if minimum is not None and value < minimum:
            raise OptionError(var, raw, "must be at least {}".format(minimum))
        return value
    return parse


def _one_of(choices: Callable[[], Sequence[str]]) -> Callable[[str, str], str]:
    def parse(var: str, raw: str) -> str:
        allowed = tuple(choices())
        if raw not in allowed:
            raise OptionError(var, raw, "must be one of " + "|".join(allowed))
        return raw
    return parse


def _text(var: str, raw: str) -> str:
    if not raw.strip():
        raise OptionError(var, raw, "must not be blank")
    return raw


def _ranks(var: str, raw: str) -> Tuple[int, ...]:
    items = raw.replace(",", " ").split()
    if not items or not all(item.isdigit() for item in items):
        raise OptionError(var, raw, "must be rank numbers separated by commas, e.g. 0,1")
    return tuple(int(item) for item in items)


def _policies() -> Sequence[str]:
    from .determinism import POLICIES

    return POLICIES


def _precisions() -> Sequence[str]:
    from .emulator.backend import PRECISIONS  # numpy: loaded only when the variable is set

    return PRECISIONS


def _profiles() -> Sequence[str]:
    from .emulator.backend import PROFILES

    return PROFILES


def _existing_path(var: str, raw: str) -> str:
    """A path that exists now, made absolute (the script may change directory before the hook reads it)."""
    if not raw.strip():
        raise OptionError(var, raw, "must not be blank")
    if not os.path.exists(raw):
        raise OptionError(var, raw, "no such file or folder (an NPU bundle folder or .tar/.tar.gz archive)")
    return os.path.abspath(raw)


def parse_faults(raw: str, var: str = ENV_RUN_HOOK_OPTIONS["faults"]) -> Dict[str, str]:
    """``{"op name": spec}`` from the one-variable encoding of ``faults=`` (see
    :mod:`npu_dump_hook.constants`, NPU_DUMP_HOOK_FAULTS): ``OP=SPEC`` entries separated by
    ``;``, OP everything before an entry's first ``=``. Each spec is checked as the emulator
    checks it; an :class:`OptionError` on ``var`` names the entry and the rule it breaks."""
    from .emulator.numerics import parse_fault  # numpy: loaded only when the variable is set

    faults = {}  # type: Dict[str, str]
    for entry in raw.split(FAULTS_SEPARATOR):
        if not entry.strip():
            continue
        op, sep, spec = (part.strip() for part in entry.partition(FAULT_OP_SEPARATOR))
        if not sep or not op or not spec:
            raise OptionError(var, raw, "entry {!r} is not OP=SPEC (e.g. conv2/Conv2D=scale=1.05; entries "
                                        "separated by '{}')".format(entry.strip(), FAULTS_SEPARATOR))
        if op in faults:
            raise OptionError(var, raw, "op {!r} is given twice".format(op))
        try:
            parse_fault(op, spec)
        except OptionError as exc:
            raise OptionError(var, raw, "entry {!r}: {}".format(entry.strip(), exc.rule)) from None
        faults[op] = spec
    if not faults:
        raise OptionError(var, raw, "names no fault: give OP=SPEC entries separated by '{}'".format(FAULTS_SEPARATOR))
    return faults


def format_faults(faults: Mapping[str, str]) -> str:
    """The NPU_DUMP_HOOK_FAULTS text of ``faults`` (the inverse of :func:`parse_faults`); an op
    name holding ``;`` or ``=`` cannot be encoded (no TF op name does): OptionError("faults")."""
    entries = []
    for op, spec in faults.items():
        if FAULTS_SEPARATOR in op or FAULT_OP_SEPARATOR in op or FAULTS_SEPARATOR in spec:
            raise OptionError("faults", {op: spec}, "an op name holds neither '{}' nor '{}', a spec no '{}'".format(
                FAULTS_SEPARATOR, FAULT_OP_SEPARATOR, FAULTS_SEPARATOR))
        entries.append(op + FAULT_OP_SEPARATOR + spec)
    return FAULTS_SEPARATOR.join(entries)


def _check_together(hook_options: Mapping[str, Any], env: Mapping[str, str]) -> None:
    """Hook keywords that cannot go together, refused before the script starts (named by variable)."""
    backend = hook_options.get("backend")
    if "initial_state" in hook_options and backend not in (None, "auto", "reference"):
        var = ENV_RUN_HOOK_OPTIONS["initial_state"]
        raise OptionError(var, env[var], "is for the golden run, whose backend is reference, not {} ({}={})".format(
            backend, ENV_RUN_HOOK_OPTIONS["backend"], backend))
    golden = "initial_state" in hook_options or backend == "reference"
    for keyword in ("emulate_profile", "faults"):
        if keyword in hook_options and (golden or backend == "npu"):
            var = ENV_RUN_HOOK_OPTIONS[keyword]
            raise OptionError(var, env[var], "applies to the emulated NPU run only, not to {}".format(
                "the golden run" if golden else "the real NPU"))


_HOOK_PARSERS = {
    "max_steps": _integer(1),
    "randomness": _one_of(_policies),
    "seed": _integer(None),
    "backend": _one_of(lambda: BACKEND_CHOICES),
    "emulate_precision": _one_of(_precisions),
    "reference": _flag,
    "save_initial_state": _flag,
    "output_dir": _text,
    "bundle_dir": _text,
    "strict": _flag,
    "ranks": _ranks,
    "graph_keyword": _text,
    "link": _one_of(lambda: LINK_MODES),
    "checksum": _one_of(lambda: CHECKSUMS),
    "archive": _one_of(lambda: ARCHIVES),
    "emulate_profile": _one_of(_profiles),
    "faults": lambda var, raw: parse_faults(raw, var),
    "initial_state": _existing_path,
    "on_mismatch": _one_of(lambda: ON_MISMATCH),
}  # type: Dict[str, Callable[[str, str], Any]]


@dataclass(frozen=True)
class RunSettings:
    """What the runner injects.

    ``options``: the dump options; None lets the hook read ``NPU_DUMP_*`` (dumping into its
    run folder unless ``NPU_DUMP_PATH`` names one). ``hook_options``: keywords for
    :class:`NpuDumpHook`. ``stop``: what a plain session does after the dumped steps.
    ``log_level``: the package's log records go to stderr at that level (None: Python's default).
    ``enabled``: False injects nothing (``NPU_DUMP_HOOK_RUN=0``).
    ``keep_checkpoints``: an Estimator trains in the script's own ``model_dir`` (default: in
    ``{run folder}/model_dir``, see :func:`_redirect_model_dir`; ``NPU_DUMP_HOOK_KEEP_CHECKPOINTS=1``).
    """

    options: Optional[DumpOptions] = None
    hook_options: Mapping[str, Any] = field(default_factory=dict)
    stop: str = "exit"
    log_level: Optional[str] = None
    enabled: bool = True
    keep_checkpoints: bool = False

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "RunSettings":
        """Read and check every variable the runner uses; an :class:`OptionError` names the variable.

        The ``NPU_DUMP_*`` values are checked as ``DumpOptions.from_env`` reads them, with a
        stand-in for an unset ``NPU_DUMP_PATH`` (the hook puts the run folder there).
        """
        env = os.environ if environ is None else environ
        enabled = _flag(ENV_RUN, env[ENV_RUN]) if env.get(ENV_RUN) else True
        hook_options = {}  # type: Dict[str, Any]
        for keyword, var in ENV_RUN_HOOK_OPTIONS.items():
            raw = env.get(var)
            if raw:
                hook_options[keyword] = _HOOK_PARSERS[keyword](var, raw)
        _check_together(hook_options, env)
        stop = _one_of(lambda: STOP_MODES)(ENV_RUN_STOP, env[ENV_RUN_STOP]) if env.get(ENV_RUN_STOP) else "exit"
        level = env.get(ENV_RUN_LOG_LEVEL) or None
        if level is not None:
            level = _one_of(lambda: _LEVELS)(ENV_RUN_LOG_LEVEL, level.upper())
        if any(var in env for var in ENV_OPTIONS.values()):
            check = dict(env)
            check.setdefault(ENV_OPTIONS["dump_path"], tempfile.gettempdir())
            DumpOptions.from_env(check)
        keep = _flag(ENV_RUN_KEEP_CHECKPOINTS, env[ENV_RUN_KEEP_CHECKPOINTS]) if env.get(ENV_RUN_KEEP_CHECKPOINTS) \
            else False
        return cls(hook_options=hook_options, stop=stop, log_level=level, enabled=enabled, keep_checkpoints=keep)


# --------------------------------------------------------------------------- the injection


def _trains(graph: Any) -> bool:
    """Whether ``graph`` holds an op that updates a trainable variable or the global step."""
    from .training_step import TrainingStepDetector

    return TrainingStepDetector(graph).verdict(graph.get_operations()).training


def _named_after_variables(exc: NpuDumpError) -> NpuDumpError:
    """An OptionError about a hook keyword or dump option, named after the variable that set it."""
    if isinstance(exc, OptionError):
        var = ENV_RUN_HOOK_OPTIONS.get(exc.option) or ENV_OPTIONS.get(exc.option)
        if var is not None and var in os.environ:
            return OptionError(var, os.environ[var], exc.rule)
    return exc


def _redirect_model_dir(estimator: Any, run_dir: str) -> None:
    """Point ``estimator`` at ``{run folder}/model_dir`` for the rest of the process.

    The dump run's step-1 checkpoint then lands in the run folder instead of the script's
    ``model_dir`` (where the next real training run would resume from it), while the script's
    own later ``evaluate``/``predict``/``get_variable_value`` calls still find it. The new
    folder starts from the latest checkpoint of ``model_dir`` (:func:`~npu_dump_hook.config.dump_run_model_dir`).
    """
    from .config import dump_run_model_dir

    run_config = _tf.estimator_run_config(estimator)
    target = dump_run_model_dir(run_config.model_dir, os.path.join(run_dir, "model_dir"))
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


class Injection(object):
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
        self._hook_module_is_ours = False
        self._lock = threading.RLock()
        self._local = threading.local()

    # -- what the script ends with ---------------------------------------------------------
    @property
    def bundle_location(self) -> Optional[str]:
        """Where the hook wrote its bundle; None before (or without) one."""
        bundle = getattr(self.hook, "bundle", None)
        return bundle.location if bundle is not None else None

    def finish(self) -> None:
        """Collect what the script left pending: a wrapped session whose steps did not end the
        run, or a monitored session left open (its hook's ``end()``)."""
        hook = self.hook
        if hook is None or not hook.counted_steps:
            return
        if self._wrapper is not None and not self._wrapper.finished:
            with self._routing():
                self._wrapper.finish()
        if self._monitored is not None and hook.record is None:
            logger.info("npu_dump_hook: closing the MonitoredSession the script left open")
            self._monitored.close()

    def announce(self, explain: bool = True) -> None:
        """Print the bundle path as the last line on stdout (once per process); without a
        bundle, with ``explain``, say why there is none when one was expected."""
        if self._announced:
            return
        self._announced = True
        location = self.bundle_location
        if location is not None:
            try:
                sys.stdout.flush()
                print(location)
                sys.stdout.flush()
            except (OSError, ValueError):  # stdout closed by its reader (| head) or by the script
                pass
        elif explain:
            self._report()

    def _report(self) -> None:
        if self._stood_down or not self.settings.enabled:
            return
        if self.hook is None:
            logger.warning("npu_dump_hook: no training was seen (Estimator.train, MonitoredSession or a "
                           "tf.compat.v1.Session running training ops): nothing was dumped")
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
        """``(hook, config carrying its dump options)`` for the first caller, else None.

        A ``config`` that switches the NPU dump on itself is kept, and its options become the
        hook's; otherwise the hook's options are written into a copy (``session_config``).
        """
        with self._lock:
            if not self._open():
                return None
            self._hook_module_is_ours = True
            from .hook import NpuDumpHook  # TensorFlow is loaded: the script is training

            try:
                own = _script_dump_options(config)
                hook = NpuDumpHook(own if own is not None else self.settings.options, **self.settings.hook_options)
            except NpuDumpError as exc:  # the settings do not fit this run: stop as a bad variable does
                self._stood_down = True
                _print_error(_named_after_variables(exc))
                raise SystemExit(EXIT_USAGE if isinstance(exc, OptionError) else EXIT_FAILED)
            self.hook, self.claimed_by = hook, where
        logger.info("npu_dump_hook: %s gets the NpuDumpHook (run folder %s)", where, hook.run_dir)
        if own is not None:
            if self.settings.options is not None or any(var in os.environ for var in ENV_OPTIONS.values()):
                logger.warning("npu_dump_hook: the script's session config sets its own NPU dump options "
                               "(dump_path %s): they are used, not NPU_DUMP_*", own.dump_path)
            return hook, config
        from .config import session_config

        return hook, session_config(hook.options, config, ranks=self.settings.hook_options.get("ranks"))

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
        {_tf.SESSION_MODULE: self._patch_sessions, _tf.MONITORED_SESSION_MODULE: self._patch_monitored,
         _tf.ESTIMATOR_MODULE: self._patch_estimator}[module_name]()

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
            if not injection.settings.keep_checkpoints:
                _redirect_model_dir(self, hook.run_dir)
            setattr(self, _SCRIPT_SESSION_CONFIG, config)  # evaluations inside train() use it (below)
            try:
                return original(*bound.args, **bound.kwargs)
            finally:
                delattr(self, _SCRIPT_SESSION_CONFIG)
                _tf.set_estimator_session_config(self, config)  # evaluate/predict keep the script's config

        _set(estimator, "train", train)
        for name in ("evaluate", "predict"):
            _set(estimator, name, _without_dump_keys(estimator.__dict__[name]))

    def _patch_monitored(self) -> None:
        base, coordinated, creators = _tf.monitored_session_classes()
        original = base.__dict__["__init__"]
        signature = inspect.signature(original)
        injection = self

        @functools.wraps(original)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            bound = signature.bind(self, *args, **kwargs)
            claim = None
            if injection._open() and _trains(_tf.tf_v1().get_default_graph()):
                creator = bound.arguments.get("session_creator")
                known = creator is None or isinstance(creator, creators)
                config = _tf.session_creator_config(creator) if creator is not None else None
                claim = injection._claim("MonitoredSession", config)
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

        _set(base, "__init__", __init__)
        if coordinated is not None:  # recovery sessions are made there too, later
            create = coordinated.__dict__["create_session"]

            @functools.wraps(create)
            def create_session(self: Any, *args: Any, **kwargs: Any) -> Any:
                with injection._enter("monitored"):
                    return create(self, *args, **kwargs)

            _set(coordinated, "create_session", create_session)

    def _patch_sessions(self) -> None:
        base, session, interactive = _tf.session_classes()
        injection = self
        for cls in (session, interactive):
            _set(cls, "__init__", self._session_init(cls.__dict__["__init__"]))
        run, close, exit_ = base.__dict__["run"], base.__dict__["close"], session.__dict__["__exit__"]

        @functools.wraps(run)
        def run_(self: Any, fetches: Any, feed_dict: Any = None, options: Any = None, run_metadata: Any = None) -> Any:
            state = self.__dict__
            wrapper = state.get(_WRAPPER)
            if wrapper is None and state.pop(_CANDIDATE, False):
                wrapper = injection._wrap_at_first_run(self)
            if wrapper is None or injection._depth("routing") or threading.get_ident() != injection._thread:
                return run(self, fetches, feed_dict, options, run_metadata)  # input threads (queue runners) too
            with injection._routing():
                result = wrapper.run(fetches, feed_dict=feed_dict, options=options, run_metadata=run_metadata)
            if wrapper.finished and injection.settings.stop == "exit":
                logger.info("npu_dump_hook: the dumped step(s) are done: the script ends with status 0 (stop=exit)")
                raise SystemExit(0)
            return result

        @functools.wraps(close)
        def close_(self: Any) -> None:
            wrapper = self.__dict__.get(_WRAPPER)
            if wrapper is None or injection._depth("routing"):
                return close(self)
            try:
                with injection._routing():
                    wrapper.finish()
            finally:
                close(self)

        @functools.wraps(exit_)
        def exit__(self: Any, exc_type: Any, exc_value: Any, exc_tb: Any) -> Any:
            wrapper = self.__dict__.get(_WRAPPER)
            if wrapper is not None and exc_type is not None and not issubclass(exc_type, SystemExit):
                wrapper.abandon()  # the script failed: no end(), no bundle (MonitoredSession's contract)
            return exit_(self, exc_type, exc_value, exc_tb)

        _set(base, "run", run_)
        _set(base, "close", close_)
        _set(session, "__exit__", exit__)

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
            if not graph.finalized and _trains(graph):
                try:
                    claim = injection._claim("Session", bound.arguments.get("config"))
                except SystemExit:  # the settings do not fit: leave a whole session behind, then stop
                    original(self, *args, **kwargs)
                    raise
                if claim is not None:
                    bound.arguments["config"] = claim[1]
            original(*bound.args, **bound.kwargs)
            if claim is not None:
                injection._wrap(self, claim[0])
            elif not graph.finalized:
                self.__dict__[_CANDIDATE] = True  # no training ops yet: decided at its first run

        return __init__

    def _wrap_at_first_run(self, session: Any) -> Any:
        """A session made before its graph had training ops: claimed at its first run if it has them now."""
        if not self._open() or session.graph.finalized or not _trains(session.graph):
            return None
        claim = self._claim("Session", None)
        if claim is None:
            return None
        self._no_config("the tf.compat.v1.Session made before its graph had training ops")
        return self._wrap(session, claim[0])

    def _wrap(self, session: Any, hook: Any) -> Any:
        from .session import NpuDumpSession

        with self._routing():  # begin() and after_create_session() run the bare session
            wrapper = NpuDumpSession(session, hook=hook, stop="continue")
        session.__dict__[_WRAPPER] = wrapper
        self._wrapper, self._thread = wrapper, threading.get_ident()
        return wrapper


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


def _set(cls: type, name: str, function: Callable[..., Any]) -> None:
    function._npu_dump_hook_patch = True  # type: ignore[attr-defined]
    if not getattr(cls.__dict__.get(name), "_npu_dump_hook_patch", False):
        setattr(cls, name, function)


class _AfterImport(object):
    """A ``sys.meta_path`` finder that calls ``callback(name)`` once a watched module has run.

    It finds the module as the other finders would and wraps the loader for that one load;
    the module keeps its own loader and spec, so nothing of the wrapping stays visible.
    """

    def __init__(self, names: Sequence[str], callback: Callable[[str], None]) -> None:
        self._names = set(names)
        self._callback = callback
        self._finding = set()  # type: set

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self._names or fullname in self._finding:
            return None
        self._finding.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._finding.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _NotifyingLoader(spec.loader, functools.partial(self._loaded, fullname))
        return spec

    def _loaded(self, fullname: str) -> None:
        self._names.discard(fullname)
        self._callback(fullname)


class _NotifyingLoader(object):
    def __init__(self, loader: Any, done: Callable[[], None]) -> None:
        self._loader = loader
        self._done = done

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__spec__.loader = module.__loader__ = self._loader
        self._loader.exec_module(module)
        self._done()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


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
        if not injection.settings.enabled:
            return injection
        names = (_tf.SESSION_MODULE, _tf.MONITORED_SESSION_MODULE, _tf.ESTIMATOR_MODULE)

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
            sys.meta_path.insert(0, _AfterImport(waiting, patch))
        return injection


def installed() -> Optional[Injection]:
    """The injection :func:`install` made in this process, if any."""
    return _installed


def site_dir() -> str:
    """The folder whose ``sitecustomize`` starts the injection from the environment alone (see
    :func:`start`): put it on ``PYTHONPATH``."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_site")


def start() -> Optional[Injection]:
    """Environment-only mode: what ``NPU_DUMP_HOOK_RUN=1`` with :func:`site_dir` on ``PYTHONPATH``
    runs at interpreter start-up, before the script.

    Installs the injection from the environment and, at exit, collects what is pending (unless
    the script died of an exception) and prints the bundle path. A bad variable is one line on
    stderr, and then nothing is injected (start-up cannot stop the interpreter cleanly).
    """
    try:
        settings = RunSettings.from_env()
    except OptionError as exc:
        _print_error("{} (nothing injected)".format(exc))
        return None
    _log_to_stderr(settings.log_level)
    injection = install(settings)
    atexit.register(_at_exit, injection)
    return injection


def _at_exit(injection: Injection) -> None:
    failed = getattr(sys, "last_value", None) is not None  # the script ended with an uncaught exception
    if not failed:
        try:
            injection.finish()
        except NpuDumpError as exc:
            _print_error(exc)
    injection.announce(explain=not failed)


# --------------------------------------------------------------------------- the child's entry point


def bootstrap_command(python: str, python_options: Sequence[str], target: Sequence[str]) -> List[str]:
    """The argv that runs ``target`` (``["--", script, args...]`` or ``["-m", module, args...]``)
    under ``python`` with this copy of the package injected, whether or not that interpreter has
    it installed; the package's folder is taken off ``sys.path`` again before the script starts."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import sys; sys.path.insert(0, {0!r}); import npu_dump_hook.runner as runner; "
            "sys.path.remove({0!r}); sys.exit(runner.main())").format(root)
    return [python] + list(python_options) + ["-c", code] + list(target)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the child: ``main(["--", "train.py", ...])`` (default: ``sys.argv[1:]``).

    Replaces ``sys.argv`` and ``sys.path[0]`` as ``python train.py`` would have set them, so it
    is meant for the interpreter started for the script (``-m`` or :func:`bootstrap_command`).
    Returns the exit status, or raises the script's ``SystemExit``.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "--":
        args = args[1:]
    if args[:1] == ["--pythonpath"]:
        print(site_dir())
        return 0
    if not args or args[0] in ("-h", "--help") or (args[0] == "-m" and len(args) < 2):
        print(_USAGE, file=sys.stderr if not args or args[0] == "-m" else sys.stdout)
        return EXIT_USAGE if not args or args[0] == "-m" else 0
    module = args[1] if args[0] == "-m" else None
    script, rest = (None, args[2:]) if module else (args[0], args[1:])
    if script is not None and not os.path.exists(script):
        print("{}: can't open file {!r}: [Errno 2] No such file or directory".format(sys.executable, script),
              file=sys.stderr)
        return EXIT_USAGE
    try:
        settings = RunSettings.from_env()
    except OptionError as exc:
        _print_error(exc)
        return EXIT_USAGE
    _log_to_stderr(settings.log_level)
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
        status = _end(injection)
        if status and exc.code in (None, 0):
            raise SystemExit(status)
        raise
    except KeyboardInterrupt as exc:
        raise exc.with_traceback(_script_frames(exc.__traceback__))
    except BaseException as exc:  # noqa: BLE001 - printed as Python prints an uncaught exception
        tb = _script_frames(exc.__traceback__)
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        injection.announce(explain=False)
        return EXIT_FAILED
    return _end(injection)


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


def _end(injection: Injection) -> int:
    """After the script: pending collection, then the bundle path as the last line."""
    status = 0
    try:
        injection.finish()
    except NpuDumpError as exc:
        _print_error(exc)
        status = EXIT_FAILED
    injection.announce()
    return status


def _print_error(exc: Any) -> None:
    print("{}: {}".format(PROG, " ".join(str(exc).splitlines())), file=sys.stderr)


class _Formatter(logging.Formatter):
    """``npu-dump-hook: warning: <message>``, as the command line prints its own records (messages
    meant for plain scripts start with ``npu_dump_hook: ``, which this prefix replaces)."""

    def format(self, record: logging.LogRecord) -> str:
        text = " ".join(record.getMessage().splitlines())
        if text.startswith("npu_dump_hook: "):
            text = text[len("npu_dump_hook: "):]
        return "{}: {}: {}".format(PROG, record.levelname.lower(), text)


def _log_to_stderr(level: Optional[str]) -> None:
    """The package's log records on stderr at ``level``, as the command line prints its own."""
    package = logging.getLogger("npu_dump_hook")
    if level is None or any(isinstance(h.formatter, _Formatter) for h in package.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    package.addHandler(handler)
    package.setLevel(getattr(logging, level))
    package.propagate = False


if __name__ == "__main__":
    # As the module named npu_dump_hook.runner, not as __main__: the patches' state lives there.
    sys.exit(importlib.import_module("npu_dump_hook.runner").main())
