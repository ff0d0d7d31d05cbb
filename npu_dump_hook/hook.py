"""``NpuDumpHook``: one training iteration, dumped, with randomness removed.

The hook decides *when*; the work is delegated (randomness to
:mod:`npu_dump_hook.determinism`, config to :mod:`npu_dump_hook.config`).

Call order under ``MonitoredSession`` / ``Estimator.train(hooks=[hook])``::

    hook = NpuDumpHook(options)          # options validated here, before any training
    hook.begin()                         # graph built, not yet finalized:
                                         #   note wall-clock start (tells this run's dump
                                         #   folders from stale ones), point DUMP_GRAPH_PATH at
                                         #   the run folder, apply the randomness policy (may
                                         #   edit the graph), create the initial-state Saver,
                                         #   keep the TF GraphDef (run folder/tf/graph.pbtxt)
    session created; variables initialised or restored
    hook.after_create_session(session, coord)   # read global_step before training
    while not stop requested:
        hook.before_run(run_context)     # before the captured step: save the variables
                                         #   (run folder/init/) so a reference run can start
                                         #   from identical weights
        session.run(train_op)
        hook.after_run(run_context, run_values)  # count; request_stop() after max_steps
    hook.end(session)                    # read global_step, record and log the run summary

Ending early: when the input runs out (``OutOfRangeError``) the monitored
session ends normally and ``end()`` still runs with the steps done so far.
Any other exception propagates and ``end()`` is *not* called (TensorFlow's
contract); the run folder then holds what was written up to that point and no
summary.

Only training is dumped: give the hook to ``estimator.train(hooks=...)`` or, with
``tf.estimator.train_and_evaluate``, to ``TrainSpec(hooks=...)`` only, never to
``EvalSpec``. On a real NPU the dump options live in the session config, so an
evaluation session built from the same ``RunConfig`` would dump as well; the
Ascend guide advises against training and evaluating in one script for that reason.
A hook instance serves one training run: a second ``begin()`` raises.

Run folder layout (``output_dir`` defaults to ``./npu_dump_hook_out``)::

    {output_dir}/{YYYYMMDDHHMMSS}_{pid}[_rank{RANK_ID}]/
        graph/          DUMP_GRAPH_PATH of this run, unless the user set one
        dump/           dump_path, when options did not name one
        tf/graph.pbtxt  the TF graph as the hook saw it (after randomness edits)
        init/           initial-state checkpoint (save_initial_state=True)
        run.json        the run summary written by end()
"""
import datetime
import json
import logging
import os
import time
from typing import Any, Dict, List, Optional, Sequence

from . import _tf
from .config import apply_graph_dump_env
from .constants import ENV_ASCEND_DEVICE_ID, ENV_DEVICE_ID, ENV_OPTIONS, ENV_RANK_ID
from .determinism import DEFAULT_SEED, POLICIES, apply_policy
from .emulator.backend import EmulatedNpu
from .errors import NpuDumpError, OptionError
from .options import DumpOptions

__all__ = ["NpuDumpHook", "DEFAULT_OUTPUT_DIR", "BACKENDS", "rank_and_device"]

logger = logging.getLogger(__name__)

DEFAULT_OUTPUT_DIR = "npu_dump_hook_out"
BACKENDS = ("auto", "npu", "emulated")
INIT_CHECKPOINT_PREFIX = "model.ckpt"


def rank_and_device(environ: Optional[Dict[str, str]] = None) -> Dict[str, Optional[int]]:
    """``rank`` from RANK_ID and ``device_id`` from ASCEND_DEVICE_ID, else DEVICE_ID, else 0."""
    env = os.environ if environ is None else environ

    def as_int(name: str) -> Optional[int]:
        raw = env.get(name)
        if raw is None or raw == "":
            return None
        if not raw.strip().isdigit():
            raise OptionError(name, raw, "must be a non-negative integer")
        return int(raw)

    device = as_int(ENV_ASCEND_DEVICE_ID)
    if device is None:
        device = as_int(ENV_DEVICE_ID)
    return {"rank": as_int(ENV_RANK_ID), "device_id": 0 if device is None else device}


def _default_options(run_dir: str) -> DumpOptions:
    """NPU_DUMP_* variables when any is set; else a data dump into the run folder."""
    if any(var in os.environ for var in ENV_OPTIONS.values()):
        return DumpOptions.from_env()
    return DumpOptions(enable_dump=True, dump_path=os.path.join(run_dir, "dump"))


class NpuDumpHook(_tf.tf_v1().train.SessionRunHook):
    """Dump one training iteration: inject nothing into the graph's math, stop after ``max_steps``.

    Args:
        options: a :class:`DumpOptions`; ``None`` reads ``NPU_DUMP_*`` variables, and when
            none is set dumps tensors into ``{run folder}/dump``.
        max_steps: steps this run may take before ``request_stop()`` (default 1), whatever
            the script asked for.
        randomness: ``audit``, ``pin``, ``strip`` (default) or ``error``; see
            :mod:`npu_dump_hook.determinism`.
        seed: the seed ``pin``/``strip`` derive every op seed from.
        output_dir: where the run folder is created (default ``./npu_dump_hook_out``).
        save_initial_state: save the variables before the captured step (turn off for
            models too large to checkpoint twice).
        backend: ``"auto"`` (default: ``"npu"`` when npu_bridge imports, where real GE writes
            the dump and the hook only configures and collects; else ``"emulated"``),
            ``"npu"``, ``"emulated"``, or a configured :class:`EmulatedNpu`.
        reference: capture the CPU/GPU (golden) tensors into ``{run folder}/golden``;
            default: on with the emulated backend, off on an NPU.
        emulate_precision: ``"fp32"`` (exact CPU values) or ``"fp16"`` (emulated backend only).
        collect: at ``end()``, locate this run's Build graph and dump folder and write a bundle.
        bundle_dir: where bundles go (default ``{output_dir}/bundles``): ``{bundle_dir}/{run
            name}``, or ``{bundle_dir}/rank_{RANK_ID}`` plus a shared ``index.json`` when
            RANK_ID is set, so the ranks of one job share one root.
        strict: raise when collection fails (default, so CI jobs fail loudly); with
            ``strict=False`` the error is logged and training code carries on.
        ranks: ranks that dump (RANK_ID); others run their step untouched. Default: every rank.
        graph_keyword: an op name that only the training graph contains (graph selection).
        link, checksum, archive: passed to the bundle writer (``auto``/``hardlink``/``copy``;
            ``sha256``/``none``; None/``tar``/``tar.gz``).
    """

    def __init__(
        self,
        options: Optional[DumpOptions] = None,
        *,
        max_steps: int = 1,
        randomness: str = "strip",
        seed: int = DEFAULT_SEED,
        output_dir: Optional[str] = None,
        save_initial_state: bool = True,
        backend: Any = "auto",
        reference: Optional[bool] = None,
        emulate_precision: str = "fp32",
        collect: bool = True,
        bundle_dir: Optional[str] = None,
        strict: bool = True,
        ranks: Optional[Sequence[int]] = None,
        graph_keyword: Optional[str] = None,
        link: str = "auto",
        checksum: str = "sha256",
        archive: Optional[str] = None,
    ) -> None:
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise OptionError("max_steps", max_steps, "must be a positive int")
        if randomness not in POLICIES:
            raise OptionError("randomness", randomness, "must be one of " + "|".join(POLICIES))
        self._ids = rank_and_device()
        self.output_dir = os.path.abspath(output_dir or DEFAULT_OUTPUT_DIR)
        self.run_dir = self._new_run_dir()
        self.options = options if options is not None else _default_options(self.run_dir)
        if not isinstance(self.options, DumpOptions):
            raise OptionError("options", type(self.options).__name__, "must be a DumpOptions (or None)")
        self.max_steps = max_steps
        self.randomness = randomness
        self.seed = seed
        self.save_initial_state = save_initial_state
        self.captured_step = self._first_captured_step()
        self.dumping = ranks is None or self._ids["rank"] is None or self._ids["rank"] in set(ranks)
        if self.dumping:
            self.backend = _resolve_backend(backend, emulate_precision)
            self.backend_name = "npu" if self.backend is None else self.backend.name
            self.reference = self.backend is not None if reference is None else bool(reference)
        else:
            # On an NPU this rank's session config still carries the dump options: build it
            # from DumpOptions() on the ranks that should not dump (see README).
            logger.info("NpuDumpHook: rank %s is not in ranks=%s: no dump on this rank", self._ids["rank"], ranks)
            self.backend, self.backend_name, self.reference, collect = None, "none", False, False
        self.golden_dir = os.path.join(self.run_dir, "golden") if self.reference else None
        self._capture = None  # type: Any
        self.collect = collect
        self.bundle_dir = os.path.abspath(bundle_dir or os.path.join(self.output_dir, "bundles"))
        self.strict = strict
        self.graph_keyword = graph_keyword
        self._bundle_args = {"link": link, "checksum": checksum, "archive": archive}
        self.bundle = None  # type: Any
        self._tf_op_names = []  # type: List[str]
        self._capturing = False
        self._reference_report = None  # type: Optional[Dict[str, Any]]
        self.summary = {}  # type: Dict[str, Any]
        self._steps_run = 0
        self._began = False
        self._started = None  # type: Optional[float]
        self._global_step_tensor = None  # type: Any
        self._global_step_before = None  # type: Optional[int]
        self._saver = None  # type: Any
        self._initial_state_path = None  # type: Optional[str]
        self._randomness_report = {}  # type: Dict[str, Any]
        self._graph_env = {}  # type: Dict[str, Any]

    # -- construction helpers -------------------------------------------------
    def _new_run_dir(self) -> str:
        stamp = datetime.datetime.now().strftime("%Y%m%d%H%M%S")
        name = "{}_{}".format(stamp, os.getpid())
        if self._ids["rank"] is not None:
            name += "_rank{}".format(self._ids["rank"])
        return os.path.join(self.output_dir, name)

    def _first_captured_step(self) -> int:
        """The first local step (0-based) the dump covers; checked against max_steps now."""
        if not self.options.enable_dump:
            return 0
        for step in range(self.max_steps):
            if self.options.dumps_step(step):
                return step
        raise OptionError(
            "dump_step", self.options.dump_step,
            "selects no step this run takes: max_steps={} runs steps 0..{}".format(self.max_steps, self.max_steps - 1),
        )

    # -- SessionRunHook ---------------------------------------------------------
    def begin(self) -> None:
        if self._began:
            raise NpuDumpError("NpuDumpHook serves one training run; create a new hook for another run")
        self._began = True
        self._started = time.time()
        tf = _tf.tf_v1()
        graph = tf.get_default_graph()
        os.makedirs(self.run_dir, exist_ok=True)
        self._graph_env = apply_graph_dump_env(os.path.join(self.run_dir, "graph"))
        self._randomness_report = apply_policy(graph, self.randomness, self.seed)
        self._global_step_tensor = tf.train.get_global_step(graph)
        self._tf_op_names = [op.name for op in graph.get_operations()]
        # The model graph as trained, before the hook adds its own Saver and capture ops.
        tf.train.write_graph(graph.as_graph_def(add_shapes=True), os.path.join(self.run_dir, "tf"), "graph.pbtxt")
        if self.save_initial_state and tf.global_variables():
            self._saver = tf.train.Saver(
                var_list=tf.global_variables(), sharded=False, name="npu_dump_hook_initial_state",
                max_to_keep=1, save_relative_paths=True,
            )
        if self.backend is not None:
            self.backend.begin(graph, self.options, self._ids["device_id"])
        if (self.backend is not None and self.options.enabled) or self.reference:
            from ._capture import TensorCapture

            self._capture = TensorCapture(graph, os.path.join(self.run_dir, ".capture"), npy_dir=self.golden_dir)
        logger.info(
            "NpuDumpHook: backend %s%s, run folder %s, randomness=%s (%d source(s)), dumping step %d of at most %d",
            self.backend_name, " + reference" if self.reference else "", self.run_dir, self.randomness,
            len(self._randomness_report["sources"]), self.captured_step, self.max_steps,
        )

    def after_create_session(self, session: Any, coord: Any) -> None:
        self._global_step_before = self._read_global_step(session)
        if self.backend is not None:
            self.backend.session_started()

    def before_run(self, run_context: Any) -> Any:
        if self._steps_run == self.captured_step and self._saver is not None and self._initial_state_path is None:
            prefix = os.path.join(self.run_dir, "init", INIT_CHECKPOINT_PREFIX)
            self._initial_state_path = self._saver.save(run_context.session, prefix, write_meta_graph=False)
            logger.info("NpuDumpHook: initial state saved to %s", self._initial_state_path)
        step = self._steps_run
        self._capturing = self._capture is not None and (self._golden_step(step) or self._emulates_step(step))
        return self._capture.run_args(run_context) if self._capturing else None

    def _golden_step(self, step: int) -> bool:
        """The reference (golden) set is the captured step only."""
        return self.reference and step == self.captured_step

    def _emulates_step(self, step: int) -> bool:
        """The emulator dumps every step dump_step selects, as GE does."""
        return self.backend is not None and self.options.enabled and self.options.dumps_step(step)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        if self._capturing:
            self._capturing = False
            self._after_capture(self._steps_run)
        self._steps_run += 1
        if self._steps_run >= self.max_steps:
            run_context.request_stop()

    def _after_capture(self, step: int) -> None:
        golden = self._golden_step(step)
        result = self._capture.finish(int(time.time() * 1000000), to_scratch=not golden)
        if self._emulates_step(step):
            self.backend.write_step(result, step)
        if golden:
            from .reference import golden_report

            self._reference_report = golden_report(result, self.golden_dir)
        else:
            self._capture.cleanup()  # scratch .npy files served the emulator only

    def end(self, session: Any) -> None:
        ended = time.time()
        self.summary = {
            "steps": self._steps_run,
            "max_steps": self.max_steps,
            "captured_step": self.captured_step,
            "global_step": {"before": self._global_step_before, "after": self._read_global_step(session)},
            "started": _iso(self._started),
            "ended": _iso(ended),
            "rank": self._ids["rank"],
            "device_id": self._ids["device_id"],
            "run_dir": self.run_dir,
            "options": self.options.as_dict(),
            "graph_dump_env": self._graph_env,
            "initial_state": self._initial_state_path,
            "backend": self.backend_name,
            "emulator": None if self.backend is None else self.backend.summary(),
            "reference": self._reference_report,
            "randomness": self._randomness_report,
            "tf_version": _tf.tf_version(),
        }
        with open(os.path.join(self.run_dir, "run.json"), "w") as handle:
            json.dump(self.summary, handle, indent=2, sort_keys=True)
        self._log_summary(ended)
        if self.collect:
            self._collect_or_report()

    def _collect_or_report(self) -> None:
        from ._collect import collect_hook_run

        try:
            self.bundle = collect_hook_run(self)
        except NpuDumpError as exc:
            if self.strict:
                raise
            logger.error("NpuDumpHook: no bundle for this run: %s", exc)

    def _log_summary(self, ended: float) -> None:
        logger.info(
            "NpuDumpHook: ran %d step(s) (global step %s -> %s) in %.1f s; backend %s; rank %s, device %s; "
            "randomness %s: %d source(s), %d not handled; initial state %s; summary %s",
            self._steps_run, self._global_step_before, self.summary["global_step"]["after"],
            ended - (self._started or ended), self.backend_name, self._ids["rank"], self._ids["device_id"],
            self.randomness,
            len(self._randomness_report.get("sources", ())), len(self._randomness_report.get("not_handled", ())),
            self._initial_state_path or "not saved", os.path.join(self.run_dir, "run.json"),
        )

    # -- helpers -------------------------------------------------------------------
    @property
    def started(self) -> Optional[float]:
        """Wall-clock time (epoch seconds) of ``begin()``; dump folders older than this are stale."""
        return self._started

    def _read_global_step(self, session: Any) -> Optional[int]:
        if self._global_step_tensor is None:
            return None
        return int(session.run(self._global_step_tensor))


def _resolve_backend(backend: Any, emulate_precision: str) -> Optional[EmulatedNpu]:
    """None for the real NPU (GE writes the dump), else the emulator instance."""
    if isinstance(backend, EmulatedNpu):
        return backend
    if backend not in BACKENDS:
        raise OptionError("backend", backend, "must be one of " + "|".join(BACKENDS) + " or an EmulatedNpu")
    if backend == "npu" or (backend == "auto" and _tf.npu_bridge_available()):
        if not _tf.npu_bridge_available():
            raise OptionError("backend", backend, "needs npu_bridge (the Ascend TF adapter), which is not importable")
        return None
    return EmulatedNpu(emulate_precision=emulate_precision)


def _iso(stamp: Optional[float]) -> Optional[str]:
    if stamp is None:
        return None
    return datetime.datetime.fromtimestamp(stamp).astimezone().isoformat(timespec="seconds")
