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
        hook.before_run(run_context)     # before the captured step: golden run: restore the NPU
                                         #   bundle's checkpoint; read and hash the variables
                                         #   (state fingerprints); save the variables (run
                                         #   folder/init/) so a golden run can start from
                                         #   identical weights; add the batch tensors to the fetches
        session.run(train_op)
        hook.after_run(run_context, run_values)  # count; hash the batch; golden run: compare
                                         #   with the NPU bundle; request_stop() after max_steps
    hook.end(session)                    # read global_step, record and log the run summary

Ending early: when the input runs out (``OutOfRangeError``) the monitored
session ends normally and ``end()`` still runs with the steps done so far.
Any other exception propagates and ``end()`` is *not* called (TensorFlow's
contract); the run folder then holds what was written up to that point and no
summary.

Failures of the hook's own work (``strict=True``, the default, vs ``strict=False``)::

    failure class                               strict=True               strict=False
    options / config / randomness="error"       raised at construction or begin(), before training
    initial-state checkpoint (before_run)       raised                    logged; no init/ in the bundle
    capture / emulated dump of a step           raised                    logged; training continues
    run.json, collection, bundle writing        raised                    logged; training code returns
    golden run, on_mismatch="error":
      checkpoint names/shapes differ            raised in begin(), before training (both)
      fingerprints differ after the step        run.json written, no      logged; no bundle
                                                bundle, raised in end()

Raised errors are the package's own (an ``OSError`` becomes a :class:`BundleError` naming the
path and what was being done); every failure is also listed in ``hook.failures`` and in
``run.json`` (``failures``). A failed capture step leaves no scratch folder, renames a
partial golden folder to ``golden.incomplete`` (never bundled as golden) and leaves
:data:`~npu_dump_hook.constants.INCOMPLETE_STEP_MARKER` in a partly written emulated step
folder, which collection refuses.

The golden run (``backend="reference", initial_state=NPU_BUNDLE``, typically on a CPU/GPU
machine, same script and data): no dump; the captured step is the NPU bundle's
(``run.captured_step``), the variables are restored from its ``data/init/`` checkpoint right
before that step (names and shapes must match the graph's global variables, else
:class:`~npu_dump_hook.errors.FingerprintMismatchError` in ``begin()``), the golden tensors are
captured, and the run's state and batch fingerprints (:mod:`npu_dump_hook.fingerprints`) are
compared with the NPU bundle's. A difference fails the run before its bundle is written
(``on_mismatch="error"``: run.json records it, ``end()`` raises the error naming the variables or
inputs and the likely cause) or is recorded as a warning (``on_mismatch="warn"``). The golden
bundle has ``backend: "reference"``, ``data/golden/`` and ``golden_for`` (docs/bundle-format.md).

Only training is dumped: give the hook to ``estimator.train(hooks=...)`` or, with
``tf.estimator.train_and_evaluate``, to ``TrainSpec(hooks=...)`` only, never to
``EvalSpec``. On a real NPU the dump options live in the session config, so an
evaluation session built from the same ``RunConfig`` would dump as well; the
Ascend guide advises against training and evaluating in one script for that reason.
A hook instance serves one training run: a second ``begin()`` raises.

The run folder layout is drawn in :mod:`npu_dump_hook.run_record`; at ``end()`` the hook
freezes a :class:`~npu_dump_hook.run_record.RunRecord`, writes ``run.json`` from it and hands
it to :func:`npu_dump_hook.collect.collect_run`. Which backend writes the dump is an object
(:mod:`npu_dump_hook.backends`), asked, never switched on.
"""
import atexit
import contextlib
import logging
import os
import shutil
import time
import weakref
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence

from . import _tf
from ._capture import TensorCapture
from ._capture_plan import resolve_memory_budget
from .backends import golden_in_run, reference_default, resolve_backend
from .collect import collect_run
from .config import apply_graph_dump_env
from .constants import ENV_OPTIONS, ON_MISMATCH
from .determinism import DEFAULT_SEED, POLICIES, apply_policy
from .errors import BundleError, FingerprintMismatchError, NpuDumpError, OptionError
from .fingerprints import CAUSES, StateReader, batch_entries, batch_tensors, compare, fingerprints_section
from .golden_run import NpuBundleTarget, check_variables
from .options import DumpOptions
from .reference import golden_report
from .run_record import RunLayout, RunRecord, dumps_on_this_rank, rank_and_device
from .training_step import TrainingStepDetector

__all__ = ["NpuDumpHook", "DEFAULT_OUTPUT_DIR", "rank_and_device"]

logger = logging.getLogger(__name__)

DEFAULT_OUTPUT_DIR = "npu_dump_hook_out"
#: A golden folder whose capture failed is renamed with this suffix (never bundled as golden).
INCOMPLETE_SUFFIX = ".incomplete"


def _default_options(layout: RunLayout) -> DumpOptions:
    """NPU_DUMP_* variables when any is set (dumping into the run folder unless NPU_DUMP_PATH
    names one); else a data dump into the run folder."""
    if any(var in os.environ for var in ENV_OPTIONS.values()):
        environ = dict(os.environ)
        environ.setdefault(ENV_OPTIONS["dump_path"], layout.dump_dir)
        return DumpOptions.from_env(environ)
    return DumpOptions(enable_dump=True, dump_path=layout.dump_dir)


class NpuDumpHook(_tf.tf_v1().train.SessionRunHook):
    """Dump one training iteration: inject nothing into the graph's math, stop after ``max_steps``.

    Args:
        options: a :class:`DumpOptions`; ``None`` reads ``NPU_DUMP_*`` variables, and when
            none is set dumps tensors into ``{run folder}/dump``.
        max_steps: training steps this run may take before ``request_stop()``, whatever the
            script asked for. Default: 1, or as many as ``dump_step`` needs (``"0|5|10"``
            runs 11 steps and dumps three); a value too small for ``dump_step`` is an
            OptionError before training.
        randomness: ``audit``, ``pin``, ``strip`` (default) or ``error``; see
            :mod:`npu_dump_hook.determinism`.
        seed: the seed ``pin``/``strip`` derive every op seed from.
        output_dir: where the run folder is created (default ``./npu_dump_hook_out``).
        save_initial_state: save the variables before the captured step (turn off for
            models too large to checkpoint twice).
        backend: ``"auto"`` (default: ``"npu"`` when npu_bridge imports, where real GE writes
            the dump and the hook only configures and collects; else ``"emulated"``),
            ``"npu"``, ``"emulated"``, ``"reference"`` (the golden run: no dump, golden tensors
            only), or a configured backend object.
        reference: capture the CPU/GPU (golden) tensors into ``{run folder}/golden``;
            default (None): on with the reference backend and with an emulated backend that
            computes CPU numerics (``golden_in_run``), off on an NPU.
        emulate_precision: ``"fp32"`` (exact CPU values) or ``"fp16"`` (emulated backend only).
        collect: at ``end()``, locate this run's Build graph and dump folder and write a bundle.
        bundle_dir: where bundles go (default ``{output_dir}/bundles``): ``{bundle_dir}/{run
            name}``, or ``{bundle_dir}/rank_{RANK_ID}/{run name}`` plus a shared ``index.json``
            when RANK_ID is set, so the ranks of one job share one root.
        strict: raise when the hook's own work fails (default, so CI jobs fail loudly); with
            ``strict=False`` the error is logged and training code carries on (module doc).
        verbose: print the one summary line at the end (bundle, steps, coverage, warnings) as
            a WARNING on the ``npu_dump_hook`` logger, which a plain script shows; False logs it
            at INFO.
        ranks: ranks that dump (RANK_ID); others run their step untouched. Default: every rank.
        emulate_profile: emulated backend: ``"exact"`` (fp32, the default) or ``"ascend"`` (NPU
            numerics in the graph, GE fusion, device formats); see :class:`EmulatedNpu`.
        faults: emulated backend: ``{"op name": "scale=1.05" | "add_noise=1e-2" | "overflow" |
            "nan"}``, kernel faults injected into the emulated run. With ``"ascend"`` or any
            fault the run computes with NPU numerics, so it takes no golden capture
            (``reference=True`` is then an OptionError): make the golden in a second run.
        initial_state: golden run: the NPU bundle (folder, ``.tar`` or ``.tar.gz``) this run
            reproduces; implies ``backend="reference"`` (``"auto"`` becomes it; another backend
            is an OptionError). Its ``data/init/`` checkpoint is restored right before its
            captured step, which this run captures (``max_steps`` defaults to that step + 1).
        restore_initial_state: golden run: restore the NPU bundle's checkpoint (default); False
            only compares (the script restores the state itself, e.g. from a model_dir).
        on_mismatch: golden run: ``"error"`` (default: fingerprints that differ from the NPU
            bundle's fail the run before its bundle is written) or ``"warn"`` (written, with the
            differences in ``warnings`` and ``golden_for``).
        graph_keyword: an op name that only the training graph contains (graph selection).
        link, checksum, archive: passed to the bundle writer (``auto``/``hardlink``/``copy``;
            ``sha256``/``none``; None/``tar``/``tar.gz``).
        force: replace an existing bundle at the destination (never needed for reruns: each
            run has its own bundle folder, also under ``rank_{RANK_ID}``).
    """

    def __init__(
        self,
        options: Optional[DumpOptions] = None,
        *,
        max_steps: Optional[int] = None,
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
        verbose: bool = True,
        ranks: Optional[Sequence[int]] = None,
        graph_keyword: Optional[str] = None,
        link: str = "auto",
        checksum: str = "sha256",
        archive: Optional[str] = None,
        force: bool = False,
        emulate_profile: Optional[str] = None,
        faults: Optional[Mapping[str, str]] = None,
        initial_state: Optional[str] = None,
        restore_initial_state: bool = True,
        on_mismatch: str = "error",
    ) -> None:
        if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
            raise OptionError("max_steps", max_steps, "must be a positive int")
        if randomness not in POLICIES:
            raise OptionError("randomness", randomness, "must be one of " + "|".join(POLICIES))
        if on_mismatch not in ON_MISMATCH:
            raise OptionError("on_mismatch", on_mismatch, "must be one of " + "|".join(ON_MISMATCH))
        self.on_mismatch = on_mismatch
        self.restore_initial_state = bool(restore_initial_state)
        #: Golden run: the NPU bundle this run reproduces (None otherwise).
        self.target = None  # type: Optional[NpuBundleTarget]
        if initial_state is not None:
            backend = _golden_backend(backend, initial_state)
            self.target = NpuBundleTarget.open(initial_state, need_checkpoint=self.restore_initial_state)
        self._ids = rank_and_device()
        self.output_dir = os.path.abspath(output_dir or DEFAULT_OUTPUT_DIR)
        self.layout = RunLayout.new(self.output_dir, self._ids["rank"])
        self.run_dir = self.layout.root
        self.options = options if options is not None else _default_options(self.layout)
        if not isinstance(self.options, DumpOptions):
            raise OptionError("options", type(self.options).__name__, "must be a DumpOptions (or None)")
        self.verbose = verbose
        self.randomness = randomness
        self.seed = seed
        self.backend = resolve_backend(backend, emulate_precision, emulate_profile, faults)
        self.golden_only = bool(getattr(self.backend, "golden_only", False))
        if self.target is not None:
            if not self.golden_only:
                raise OptionError("initial_state", initial_state, "is for the golden run: the backend must be "
                                                                  "'reference', not {!r}".format(self.backend.name))
            self.max_steps, self.captured_step = _golden_steps(max_steps, self.target.captured_step)
        else:
            self.max_steps = _steps_for(max_steps, self.options)
            self.captured_step = self._first_captured_step()
        # A golden run restores the NPU bundle's checkpoint; saving its own would only repeat it.
        self.save_initial_state = save_initial_state and not self.golden_only
        self.dumping = dumps_on_this_rank(ranks)
        self.backend_name = self.backend.name if self.dumping else "none"  # run.json: this rank dumped nothing
        self.reference = _reference_choice(reference, self.backend)
        if not self.dumping:
            # On an NPU this rank's session config still carries the dump options: build it
            # from DumpOptions() on the ranks that should not dump (see README).
            logger.info("NpuDumpHook: rank %s is not in ranks=%s: no dump on this rank", self._ids["rank"], ranks)
            self.reference, collect = False, False
        self.golden_dir = self.layout.golden_dir if self.reference else None
        self._capture = None  # type: Any
        self.collect = collect
        self.bundle_dir = os.path.abspath(bundle_dir or os.path.join(self.output_dir, "bundles"))
        if self.dumping:  # like dump_path: a folder the run cannot write fails now, not after training
            _check_writable_dir("output_dir", output_dir, self.output_dir)
            if collect:
                _check_writable_dir("bundle_dir", bundle_dir, self.bundle_dir)
        atexit.register(_warn_if_never_began, weakref.ref(self))
        self.strict = strict
        self.graph_keyword = graph_keyword
        self._bundle_args = {"link": link, "checksum": checksum, "archive": archive, "force": force}
        self.bundle = None  # type: Any
        self.record = None  # type: Optional[RunRecord]
        self._tf_op_names = []  # type: List[str]
        self._capturing = False
        self._reference_report = None  # type: Optional[Dict[str, Any]]
        self.summary = {}  # type: Dict[str, Any]
        #: What failed in the hook's own work, in order: ``{"doing", "error"}`` (also in run.json).
        self.failures = []  # type: List[Dict[str, str]]
        #: The training steps counted: ``{"step", "fetches", "updates"}`` each (also in run.json).
        self.counted_steps = []  # type: List[Dict[str, Any]]
        #: Runs that were not training steps (initializer, evaluation, ``sess.run(cost)``): how many,
        #: and the fetches of the first few.
        self.skipped_runs = {"count": 0, "examples": []}  # type: Dict[str, Any]
        self._counting = False
        self._detector = None  # type: Any
        self._steps_run = 0
        self._began = False
        self._started = None  # type: Optional[float]
        self._global_step_tensor = None  # type: Any
        self._global_step_before = None  # type: Optional[int]
        self._saver = None  # type: Any
        self._initial_state_path = None  # type: Optional[str]
        self._randomness_report = {}  # type: Dict[str, Any]
        self._graph_env = {}  # type: Dict[str, Any]
        self._state_reader = None  # type: Optional[StateReader]
        self._restorer = None  # type: Any
        self._restore_prefix = None  # type: Optional[str]
        self._state = None  # type: Optional[List[Dict[str, Any]]]
        self._batch = None  # type: Optional[List[Dict[str, Any]]]
        self._batch_plan = None  # type: Optional[List[Any]]
        self._fingerprint_skips = []  # type: List[Dict[str, str]]
        self._golden_for = None  # type: Optional[Dict[str, Any]]
        self._mismatch = None  # type: Optional[FingerprintMismatchError]
        #: What the bundle's ``warnings`` must carry (e.g. fingerprint differences with on_mismatch="warn").
        self.warnings = []  # type: List[str]

    # -- construction helpers -------------------------------------------------
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
        self._graph_env = apply_graph_dump_env(self.layout.graph_dir)
        self._randomness_report = apply_policy(graph, self.randomness, self.seed)
        self._global_step_tensor = tf.train.get_global_step(graph)
        self._tf_op_names = [op.name for op in graph.get_operations()]
        self._detector = TrainingStepDetector(graph)
        self._check_dump_layer(graph)
        # The model graph as trained, before the hook adds its own Saver and capture ops.
        tf.train.write_graph(graph.as_graph_def(add_shapes=True), self.layout.tf_dir,
                             os.path.basename(self.layout.tf_graph))
        variables = list(tf.global_variables())
        self._state_reader = StateReader(variables, resolve_memory_budget(None))
        if self.save_initial_state and variables:
            self._saver = tf.train.Saver(
                var_list=variables, sharded=False, name="npu_dump_hook_initial_state",
                max_to_keep=1, save_relative_paths=True,
            )
        if self.target is not None and self.restore_initial_state:
            self._prepare_restore(variables)
        if self.dumping:
            self.backend.begin(graph, self.options, self._ids["device_id"])
        if self._backend_captures() or self.reference:
            self._capture = TensorCapture(graph, self.layout.capture_dir, npy_dir=self.golden_dir)
        logger.info(
            "NpuDumpHook: backend %s%s, run folder %s, randomness=%s (%d source(s)), dumping step %d of at most %d",
            self.backend_name, " + reference" if self.reference else "", self.run_dir, self.randomness,
            len(self._randomness_report["sources"]), self.captured_step, self.max_steps,
        )

    def _prepare_restore(self, variables: List[Any]) -> None:
        """Golden run: the Saver that restores the NPU bundle's checkpoint, over the variables both
        hold; a name or shape mismatch fails now (on_mismatch="error") or restores the rest ("warn")."""
        target = self.target
        self._restore_prefix = target.checkpoint_prefix(self.layout.target_scratch_dir)
        stored = target.checkpoint_variables(self._restore_prefix)
        diff = check_variables(stored, variables)
        if any(diff.values()):
            message = _variables_message(target.path, diff)
            if self.on_mismatch == "error":
                self.failures.append({"doing": "checking the variables of {}".format(target.path),
                                      "error": "FingerprintMismatchError: " + message})
                raise FingerprintMismatchError(message, target.path, {"state": diff})
            logger.warning("NpuDumpHook: %s (on_mismatch='warn': restoring the %d variable(s) both hold)",
                           message, len(stored) - len(diff["extra"]) - len(diff["mismatched"]))
            self.warnings.append(message)
        skip = set(diff["missing"]) | set(diff["mismatched"])
        restorable = {v.op.name: v for v in variables if v.op.name not in skip}
        if restorable:
            self._restorer = _tf.tf_v1().train.Saver(var_list=restorable, sharded=False,
                                                     name="npu_dump_hook_golden_restore")

    def after_create_session(self, session: Any, coord: Any) -> None:
        self._global_step_before = self._read_global_step(session)
        if self.dumping:
            self.backend.session_started()

    def before_run(self, run_context: Any) -> Any:
        args = run_context.original_args
        verdict = self._detector.verdict(args.fetches, args.feed_dict)
        self._counting = verdict.training
        if not verdict.training:
            self._note_skipped(verdict)
            return None
        self.counted_steps.append(dict(verdict.as_dict(), step=self._steps_run))
        if not self._steps_run and self._global_step_before is None:  # initialized only now
            self._global_step_before = self._read_global_step(run_context.session)
        step = self._steps_run
        fetches = {}  # type: Dict[str, Any]
        if step == self.captured_step and self.dumping:
            self._before_captured_step(run_context)
            if self._batch_plan:
                fetches["batch"] = [tensor for tensor, _ in self._batch_plan]
        self._capturing = self._capture is not None and (self._golden_step(step) or self._emulates_step(step))
        capture_args = None
        if self._capturing:
            with self._guard("preparing the capture of step {}".format(step), self._abandon_capture):
                capture_args = self._capture.run_args(run_context)
            self._capturing = capture_args is not None  # None: the guard logged a failure (strict=False)
        if capture_args is None and not fetches:
            return None
        if capture_args is None:
            return _tf.tf_v1().train.SessionRunArgs(fetches)
        fetches["capture"] = capture_args.fetches
        return _tf.tf_v1().train.SessionRunArgs(fetches, feed_dict=capture_args.feed_dict,
                                                 options=capture_args.options)

    def _before_captured_step(self, run_context: Any) -> None:
        """Golden run: restore; then the state fingerprints, the initial-state checkpoint and the
        batch tensors to fetch with the step."""
        session = run_context.session
        if self._restorer is not None:
            with self._guard("restoring the initial state from {}".format(self.target.path)):
                self._restorer.restore(session, self._restore_prefix)
                logger.info("NpuDumpHook: initial state restored from %s", self.target.path)
            shutil.rmtree(self.layout.target_scratch_dir, ignore_errors=True)
        if self._state is None and self._state_reader is not None:
            with self._guard("reading the state fingerprints before step {}".format(self.captured_step)):
                self._state, skipped = self._state_reader.read(session)
                self._fingerprint_skips.extend(skipped)
        if self._saver is not None and self._initial_state_path is None:
            with self._guard("saving the initial state to {}".format(self.layout.init_prefix)):
                self._initial_state_path = self._saver.save(session, self.layout.init_prefix,
                                                            write_meta_graph=False)
                logger.info("NpuDumpHook: initial state saved to %s", self._initial_state_path)
        args = run_context.original_args
        with self._guard("choosing the batch tensors of step {}".format(self.captured_step)):
            self._batch_plan, skipped = batch_tensors(run_context.session.graph, args.fetches, args.feed_dict)
            self._fingerprint_skips.extend(skipped)

    def _note_skipped(self, verdict: Any) -> None:
        self.skipped_runs["count"] += 1
        if len(self.skipped_runs["examples"]) < 3:
            self.skipped_runs["examples"].append(verdict.fetches[:5])
        logger.info("NpuDumpHook: run of %s is not a training step (it updates no trainable variable): "
                    "not counted, not dumped", ", ".join(verdict.fetches[:5]) or "nothing")

    def _golden_step(self, step: int) -> bool:
        """The reference (golden) set is the captured step only."""
        return self.reference and step == self.captured_step

    def _backend_captures(self) -> bool:
        """The backend writes dump files from captured steps (the emulator), and dumping is on."""
        return self.dumping and self.backend.captures and self.options.enabled

    def _emulates_step(self, step: int) -> bool:
        """The emulator dumps every step dump_step selects, as GE does."""
        return self._backend_captures() and self.options.dumps_step(step)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        if not self._counting:
            return  # not a training step: neither counted nor captured
        if self._batch_plan is not None and self._steps_run == self.captured_step:
            plan, self._batch_plan = self._batch_plan, None
            with self._guard("hashing the batch of step {}".format(self._steps_run)):
                self._batch = batch_entries(plan, run_values.results["batch"] if plan else [])
        if self._capturing:
            self._capturing = False
            with self._guard("writing the dump of step {}".format(self._steps_run), self._abandon_capture):
                self._after_capture(self._steps_run)
        if self.target is not None and self._steps_run == self.captured_step:
            self._compare_with_target(run_context)
        self._steps_run += 1
        if self._steps_run >= self.max_steps:
            run_context.request_stop()

    def _compare_with_target(self, run_context: Any) -> None:
        """Golden run, after the captured step: this run's fingerprints against the NPU bundle's."""
        target = self.target
        comparison = compare(target.fingerprints, self._fingerprints())
        self._golden_for = dict(target.identity(), match=comparison.match, on_mismatch=self.on_mismatch,
                                differences=comparison.as_dict())
        for note in comparison.notes:
            logger.warning("NpuDumpHook: golden run for %s: %s", target.path, note)
            self.warnings.append("golden run: " + note)
        if comparison.match:
            logger.info("NpuDumpHook: fingerprints match NPU bundle %s (%d variable(s), %d input(s))", target.path,
                        len(self._state or ()), len(self._batch or ()))
            return
        message = comparison.message(target.path, _randomness_hints(target.randomness, self._randomness_report))
        if self.on_mismatch == "warn":
            logger.warning("NpuDumpHook: %s (on_mismatch='warn': the golden bundle is written)", message)
            self.warnings.append(message)
            return
        self._mismatch = FingerprintMismatchError(message, target.path, comparison.as_dict())
        self.failures.append({"doing": "comparing the fingerprints with {}".format(target.path),
                              "error": "FingerprintMismatchError: " + message})
        run_context.request_stop()

    def _after_capture(self, step: int) -> None:
        golden = self._golden_step(step)
        result = self._capture.finish(int(time.time() * 1000000), to_scratch=not golden)
        if self._emulates_step(step):
            self.backend.write_step(result, step)
        if golden:
            self._reference_report = golden_report(result, self.golden_dir)
        else:
            self._capture.cleanup()  # scratch .npy files served the emulator only

    def _abandon_capture(self) -> None:
        """After a failed capture step: no scratch left behind, and no golden folder that looks
        complete (its .npy files without golden_manifest.json) -- it becomes golden.incomplete."""
        self._capture.cleanup()
        if self.golden_dir and os.path.isdir(self.golden_dir) and self._reference_report is None:
            aside = self.golden_dir + INCOMPLETE_SUFFIX
            shutil.rmtree(aside, ignore_errors=True)
            os.rename(self.golden_dir, aside)

    def end(self, session: Any) -> None:
        self.record = self._freeze(time.time(), self._read_global_step(session))
        self.summary = self.record.summary()
        with self._guard("writing {}".format(self.layout.run_json)):
            self.record.write()
        self._log_summary(self.record.ended)
        if self._mismatch is not None:
            self._restore_graph_env()
            if self.strict:
                raise self._mismatch  # no bundle: the golden run is not the NPU run's (run.json says so)
            logger.error("NpuDumpHook: %s (strict=False: no golden bundle written)", self._mismatch)
            self._announce()
            return
        if self.collect:
            self._collect_or_report()
        self._restore_graph_env()
        self._announce()

    def _restore_graph_env(self) -> None:
        """Unset the DUMP_GRAPH_PATH this run set, so a later run in the same process (a second
        hook, a notebook cell) gets its own graph folder instead of sharing this one. A golden
        run (nothing writes a graph or a dump) leaves no empty graph/ and dump/ folders behind."""
        if self.golden_only:
            for folder in (self.layout.graph_dir, self.layout.dump_dir):
                _remove_if_empty(folder)
        env = self._graph_env
        if env.get("set_by_npu_dump_hook") and os.environ.get(env["variable"]) == env["value"]:
            del os.environ[env["variable"]]

    def _announce(self) -> None:
        """The one line a user must see: where the bundle went (WARNING, so a plain script shows it)."""
        level = logging.WARNING if self.verbose else logging.INFO
        if self.bundle is not None and self.golden_only:
            target = self._golden_for
            logger.log(level, "npu_dump_hook: golden bundle %s: %d training step(s), golden step %d, %s, "
                       "%d warning(s)%s", self.bundle.location, self._steps_run, self.captured_step,
                       "for NPU bundle {} (fingerprints {})".format(target["path"], "match" if target["match"]
                                                                    else "DIFFER") if target else "no NPU bundle",
                       len(self.bundle.warnings), "".join("\n  warning: " + w for w in self.bundle.warnings[:5]))
        elif self.bundle is not None:
            coverage = self.bundle.coverage or {}
            logger.log(level, "npu_dump_hook: bundle %s: %d training step(s), dump step(s) %s, coverage %s/%s ops, "
                       "%d warning(s)%s", self.bundle.location, self._steps_run, ", ".join(self.bundle.steps) or "none",
                       coverage.get("dumped", "?"), coverage.get("expected", "?"), len(self.bundle.warnings),
                       "".join("\n  warning: " + w for w in self.bundle.warnings[:5]))
            if self.dumping and not golden_in_run(self.backend):
                logger.log(level, "npu_dump_hook: the emulated run computed with NPU numerics (%s): its training "
                           "results differ from a fp32 run and it has no golden tensors; make them in a second "
                           "run: NpuDumpHook(backend='reference', initial_state=%r)", _numerics_text(self.backend),
                           self.bundle.location)
        elif self.collect:
            reason = self.failures[-1]["error"] if self.failures else "nothing to collect (see the log)"
            logger.log(level, "npu_dump_hook: no bundle for run %s: %s", self.run_dir, reason)

    def _check_dump_layer(self, graph: Any) -> None:
        """dump_layer names that are no op of the graph would silently dump nothing."""
        if not (self.dumping and self.options.enable_dump and self.options.layers):
            return
        missing = [name for name in self.options.layers if _op_or_none(graph, name) is None]
        if missing:
            raise OptionError("dump_layer", self.options.dump_layer,
                              "names op(s) that are not in the graph: {}".format(", ".join(missing)))

    @contextlib.contextmanager
    def _guard(self, doing: str, undo: Optional[Callable[[], None]] = None) -> Iterator[None]:
        """Run the hook's own work for one failure class (see "Failures" in the module doc).

        A failure first runs ``undo`` (best effort), is recorded in ``failures`` (run.json),
        then raised with ``strict=True`` -- an OSError as a BundleError naming the path and
        what was being done -- or logged with ``strict=False``, where training carries on.
        """
        try:
            yield
        except (NpuDumpError, OSError) as exc:
            if undo is not None:
                try:
                    undo()
                except OSError as cleanup_error:  # e.g. the same full disk: report, keep the first error
                    logger.error("NpuDumpHook: cleaning up after %s failed too: %s", doing, cleanup_error)
            self.failures.append({"doing": doing, "error": "{}: {}".format(type(exc).__name__, exc)})
            if self.strict:
                if isinstance(exc, NpuDumpError):
                    raise
                raise BundleError("NpuDumpHook: {} failed: {}".format(doing, _os_error_text(exc)),
                                  getattr(exc, "filename", None)) from exc
            logger.error("NpuDumpHook: %s failed (strict=False: training continues): %s", doing, exc)

    def _freeze(self, ended: float, global_step_after: Optional[int]) -> RunRecord:
        """What this run was, for run.json and collection."""
        return RunRecord(
            layout=self.layout, options=self.options, backend=self.backend_name,
            started=self._started or ended, ended=ended, steps=self._steps_run, max_steps=self.max_steps,
            captured_step=self.captured_step,
            global_step={"before": self._global_step_before, "after": global_step_after},
            rank=self._ids["rank"], device_id=self._ids["device_id"], randomness=self._randomness_report,
            graph_dump_env=self._graph_env, tf_version=_tf.tf_version(), initial_state=self._initial_state_path,
            emulator=self.backend.summary() if self.dumping else None, reference=self._reference_report,
            tf_op_names=tuple(self._tf_op_names), graph_dirs=self._graph_dirs(), settle=self.backend.settles,
            graph_keyword=self.graph_keyword, fingerprints=self._fingerprints(), golden_for=self._golden_for,
            golden_only=self.golden_only, warnings=tuple(self.warnings),
            extra={"failures": list(self.failures), "counted_steps": list(self.counted_steps),
                   "skipped_runs": dict(self.skipped_runs)},
        )

    def _fingerprints(self) -> Optional[Dict[str, Any]]:
        """The ``fingerprints`` section (None when the captured step never ran)."""
        if self._state is None and self._batch is None:
            return None
        return fingerprints_section(self.captured_step, self._state, self._batch, self._fingerprint_skips)

    def _graph_dirs(self) -> Optional[tuple]:
        dirs = self.backend.graph_dirs(self._ids["device_id"]) if self.dumping else None
        return tuple(dirs) if dirs else None

    def _collect_or_report(self) -> None:
        with self._guard("collecting the bundle into {}".format(self.bundle_dir)):
            if not self._steps_run:
                raise NpuDumpError(
                    "no training step ran: {} run(s) updated no trainable variable (fetches {}), so there is "
                    "no iteration to bundle".format(self.skipped_runs["count"], self.skipped_runs["examples"] or "none"))
            self.bundle = collect_run(self.record, self.bundle_dir, **self._bundle_args)

    def _log_summary(self, ended: float) -> None:
        logger.info(
            "NpuDumpHook: ran %d step(s) (global step %s -> %s) in %.1f s; backend %s; rank %s, device %s; "
            "randomness %s: %d source(s), %d not handled; initial state %s; summary %s",
            self._steps_run, self._global_step_before, self.summary["global_step"]["after"],
            ended - (self._started or ended), self.backend_name, self._ids["rank"], self._ids["device_id"],
            self.randomness,
            len(self._randomness_report.get("sources", ())), len(self._randomness_report.get("not_handled", ())),
            self._initial_state_path or "not saved", self.layout.run_json,
        )

    # -- helpers -------------------------------------------------------------------
    @property
    def started(self) -> Optional[float]:
        """Wall-clock time (epoch seconds) of ``begin()``; dump folders older than this are stale."""
        return self._started

    def _read_global_step(self, session: Any) -> Optional[int]:
        """The global step's value; None without one or before it is initialized (a plain
        session wrapped before ``sess.run(init)``)."""
        if self._global_step_tensor is None:
            return None
        try:
            return int(session.run(self._global_step_tensor))
        except _tf.tf_v1().errors.FailedPreconditionError:
            return None


def _remove_if_empty(folder: str) -> None:
    try:
        os.rmdir(folder)
    except OSError:  # not empty (the user's own dump_path, say) or already gone
        pass


def _golden_backend(backend: Any, initial_state: Any) -> Any:
    """``initial_state`` makes a golden run: ``"auto"`` becomes ``"reference"``."""
    if backend == "auto":
        return "reference"
    if backend == "reference" or getattr(backend, "golden_only", False):
        return backend
    raise OptionError("initial_state", initial_state, "is for the golden run: use backend='reference' (or leave "
                                                      "backend unset), not {!r}".format(getattr(backend, "name",
                                                                                                backend)))


def _golden_steps(max_steps: Optional[int], captured: int) -> tuple:
    """``(max_steps, captured step)`` of a golden run: the NPU bundle's step, and enough steps to reach it."""
    if max_steps is None:
        return captured + 1, captured
    if max_steps <= captured:
        raise OptionError("max_steps", max_steps, "the NPU bundle captured step {}: a golden run needs at least {} "
                                                  "step(s)".format(captured, captured + 1))
    return max_steps, captured


def _reference_choice(reference: Optional[bool], backend: Any) -> bool:
    """``reference=`` resolved for ``backend`` (None: :func:`reference_default`)."""
    if reference is None:
        return reference_default(backend)
    if reference and not golden_in_run(backend):
        raise OptionError("reference", reference, "this emulated run computes with NPU numerics ({}), so its "
                                                  "tensors are no golden; make the golden in a second run with "
                                                  "backend='reference', initial_state=<this run's bundle>".format(
                                                      _numerics_text(backend)))
    if not reference and getattr(backend, "golden_only", False):
        raise OptionError("reference", reference, "the reference backend's only product is the golden capture")
    return bool(reference)


def _numerics_text(backend: Any) -> str:
    faults = getattr(backend, "faults", None) or {}
    return "profile {}{}".format(getattr(backend, "profile", "?"),
                                 ", faults on {}".format(", ".join(sorted(faults))) if faults else "")


def _variables_message(target: str, diff: Mapping[str, Sequence[str]]) -> str:
    parts = []
    for key, words in (("missing", "are not in its checkpoint"), ("extra", "are in its checkpoint only"),
                       ("mismatched", "have another shape there")):
        if diff[key]:
            names = list(diff[key])
            parts.append("{} variable(s) of this graph {}: {}{}".format(
                len(names), words, ", ".join(names[:10]), " ..." if len(names) > 10 else ""))
    return ("initial_state {}: the NPU bundle's checkpoint does not hold this graph's variables: {}. Likely cause: "
            "{}".format(target, "; ".join(parts), CAUSES["state_variables"]))


def _randomness_hints(npu: Mapping[str, Any], here: Mapping[str, Any]) -> List[str]:
    """Differences between the two runs' randomness policy and seed, which change data order and dropout."""
    hints = []
    for key in ("policy", "seed"):
        if npu.get(key) is not None and here.get(key) is not None and npu.get(key) != here.get(key):
            hints.append("the NPU run used randomness {}={!r}, this run {!r}".format(key, npu[key], here[key]))
    return hints


def _os_error_text(exc: OSError) -> str:
    """``strerror: filename`` (an OSError's str() omits the path when it was raised without one)."""
    text = exc.strerror or str(exc)
    return "{}: {}".format(text, exc.filename) if exc.filename else text


def _steps_for(max_steps: Optional[int], options: DumpOptions) -> int:
    """The training steps to run: ``max_steps``, or (None) enough for every step ``dump_step`` selects."""
    ranges = options.step_ranges() if options.enable_dump else []
    last = max((end for _, end in ranges), default=0)
    if max_steps is None:
        if last:
            logger.info("NpuDumpHook: dump_step=%r: running %d training steps to reach its last step",
                        options.dump_step, last + 1)
        return last + 1
    if last >= max_steps:
        raise OptionError("max_steps", max_steps, "dump_step={!r} selects step {}, but max_steps={} runs steps "
                          "0..{}: raise max_steps or leave it unset".format(options.dump_step, last, max_steps,
                                                                           max_steps - 1))
    return max_steps


def _check_writable_dir(option: str, given: Optional[str], path: str) -> None:
    """Create ``path`` and require it to be a writable folder, or raise OptionError naming ``option``."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise OptionError(option, given or path, "cannot create {}: {}".format(path, exc.strerror or exc))
    if not os.access(path, os.W_OK | os.X_OK):
        raise OptionError(option, given or path, "must be a writable folder: " + path)


def _op_or_none(graph: Any, name: str) -> Any:
    try:
        return graph.get_operation_by_name(name)
    except KeyError:
        return None


def _warn_if_never_began(ref: "weakref.ref") -> None:
    """At interpreter exit: a hook that was created but never handed to a session did nothing."""
    hook = ref()
    if hook is not None and not hook._began:  # noqa: SLF001 - our own hook
        logger.warning("npu_dump_hook: an NpuDumpHook was created but never began (was it passed to "
                       "estimator.train(hooks=...) or MonitoredSession(hooks=...)?): nothing was dumped "
                       "(run folder %s)", hook.run_dir)
