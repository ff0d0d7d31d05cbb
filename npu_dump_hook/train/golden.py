"""The golden run: restore the NPU bundle's state before its captured step, compare fingerprints after it.

Contract (a run without ``initial_state`` gets a :class:`GoldenRun` whose methods do nothing)::

    golden = GoldenRun.open(initial_state, restore, on_mismatch, replay_inputs)  # the NPU bundle opened
    backend = golden_backend(backend, initial_state)   # before: "auto" -> "reference" (rules: settings)
    golden.begin(variables, scratch_dir, guard) # the kept inputs loaded and checked (replay_inputs);
                                                # names/shapes checked; mismatch + "error": raised now
    feeds = golden.replay_feeds(walk, run_context, guard)  # captured step: the NPU step's inputs
    golden.restore(session, guard)              # right before the captured step
    golden.end_replay()                         # after it: the script's feed_dict as it was
    golden.compare(section, randomness, run_context)   # after it: ``golden_for``; a mismatch
                                                # with on_mismatch="error" is kept in ``mismatch``
                                                # (end() raises it) and stops the run

The NPU bundle is read through :class:`~npu_dump_hook.golden_run.NpuBundleTarget`'s public API;
the input replay is :mod:`npu_dump_hook.train.replay`. An NPU bundle that keeps only the hashes
of its inputs (above its ``max_input_bytes``), or none, cannot be replayed: a warning says so,
the script makes its own batch and the fingerprints show whether it is the NPU step's.
"""
import logging
import shutil
from typing import Any, Dict, List, Mapping, Optional, Sequence  # noqa: F401 (type comments)

from .. import _tf
from .._inert import printable
from ..errors import FingerprintMismatchError, OptionError
from .fingerprints import CAUSES, compare
from ..golden_run import NpuBundleTarget, check_variables
from .guard import HOOK_LOGGER, FailureGuard
from .replay import InputReplay

__all__ = ["GoldenRun", "golden_backend"]

logger = logging.getLogger(HOOK_LOGGER)


class GoldenRun(object):
    """What the golden run adds to a run (see the module doc); inert without a target."""

    def __init__(self, target: Optional[NpuBundleTarget], restore: bool, on_mismatch: str,
                 replay_inputs: bool = True) -> None:
        #: The NPU bundle this run reproduces (None: not a golden run).
        self.target = target
        self.restore_initial_state = restore
        self.on_mismatch = on_mismatch
        #: ``golden_for`` of run.json and the bundle (None until compared).
        self.golden_for = None  # type: Optional[Dict[str, Any]]
        #: The difference that fails the run (on_mismatch="error"), raised by the hook's end().
        self.mismatch = None  # type: Optional[FingerprintMismatchError]
        #: What the bundle's ``warnings`` must carry.
        self.warnings = []  # type: List[str]
        self.replay_inputs = replay_inputs
        #: The NPU step's kept inputs, fed at the captured step (None: not replayed, see ``_not_replayed``).
        self.replay = None  # type: Optional[InputReplay]
        self._not_replayed = None  # type: Optional[str]
        self._restorer = None  # type: Any
        self._prefix = None  # type: Optional[str]
        self._scratch = None  # type: Optional[str]
        self._checked = 0  # the number of variables the restorer was made for
        self._late = False  # variables of the checkpoint not in the graph yet: checked by catch_up

    @classmethod
    def open(cls, initial_state: Optional[str], restore: bool, on_mismatch: str,
             replay_inputs: bool = True) -> "GoldenRun":
        target = None
        if initial_state is not None:
            target = NpuBundleTarget.open(initial_state, need_checkpoint=restore)
        return cls(target, restore, on_mismatch, bool(replay_inputs))

    @property
    def captured_step(self) -> Optional[int]:
        """The NPU bundle's captured step (None: not a golden run)."""
        return self.target.captured_step if self.target is not None else None

    def mode_for(self, mode: str) -> str:
        """A golden run's ``mode``: the NPU bundle's (``run.mode``) under ``auto``; another mode than
        the bundle's is an OptionError (the golden run must capture the same kind of iteration)."""
        if self.target is None:
            return mode
        recorded = self.target.mode
        if mode not in ("auto", recorded):
            kind = "an inference iteration" if recorded == "infer" else "a training step"
            raise OptionError("mode", mode, "the NPU bundle {} captured {} (run.mode {}): leave mode auto or give "
                                            "{}".format(printable(self.target.path), kind, recorded, recorded))
        return recorded

    def begin(self, variables: List[Any], scratch_dir: str, guard: FailureGuard, late: bool = False) -> None:
        """The Saver that restores the NPU bundle's checkpoint, over the variables both hold; a name
        or shape mismatch fails now (on_mismatch="error") or restores the rest ("warn"). First the
        NPU step's kept inputs are loaded, every file and value checked (nothing restored yet).
        ``late``: the graph stays editable until the captured step (a plain session): variables the
        checkpoint holds and the graph does not yet (Keras makes its optimizer's in ``fit``) are
        checked again by :meth:`catch_up` at the captured step, not refused now."""
        if self.target is None:
            return
        self._load_inputs(scratch_dir)
        if not self.restore_initial_state or self.target.stateless:
            # stateless: an inference graph without variables (its weights are constants)
            shutil.rmtree(scratch_dir, ignore_errors=True)
            return
        self._scratch = scratch_dir
        self._prefix = self.target.checkpoint_prefix(scratch_dir)
        self._restorer_for(variables, guard, late)

    def catch_up(self, variables: List[Any], guard: FailureGuard) -> None:
        """Before the captured step, when the graph gained variables after :meth:`begin` or their
        check was put off (``late``): the check and the restoring Saver again, over all of them."""
        if self._prefix is not None and (self._late or len(variables) != self._checked):
            self._restorer_for(variables, guard, late=False)

    def _restorer_for(self, variables: List[Any], guard: FailureGuard, late: bool) -> None:
        target = self.target
        stored = target.checkpoint_variables(self._prefix)
        diff = check_variables(stored, variables)
        self._checked, self._late = len(variables), late and bool(diff["extra"])
        if self._late and not diff["missing"] and not diff["mismatched"]:
            diff = {key: [] for key in diff}  # only not built yet: checked at the captured step
        if any(diff.values()):
            message = _variables_message(target.path, diff)
            if self.on_mismatch == "error":
                guard.failures.append({"doing": "checking the variables of {}".format(target.path),
                                       "error": "FingerprintMismatchError: " + message})
                raise FingerprintMismatchError(message, target.path, {"state": diff})
            logger.warning("NpuDumpHook: %s (on_mismatch='warn': restoring the %d variable(s) both hold)",
                           printable(message), len(stored) - len(diff["extra"]) - len(diff["mismatched"]))
            self.warnings.append(message)
        skip = set(diff["missing"]) | set(diff["mismatched"])
        restorable = {v.op.name: v for v in variables if v.op.name not in skip}
        if restorable:
            self._restorer = _tf.tf_v1().train.Saver(var_list=restorable, sharded=False,
                                                     name="npu_dump_hook_golden_restore")

    def _load_inputs(self, scratch_dir: str) -> None:
        target = self.target
        manifest = target.inputs
        if not self.replay_inputs:
            self._not_replayed = "replay_inputs=False: this run made its own batch"
            return
        if manifest is None:
            reason = "the NPU bundle keeps no input values (made without input replay)"
        elif not manifest.get("kept"):
            reason = "the NPU bundle keeps only the sha256 of its inputs ({})".format(manifest.get("reason"))
        else:
            self.replay = InputReplay(target.path, target.input_values(scratch_dir))
            return
        self._not_replayed = reason
        message = ("cannot replay the NPU step's inputs: {}; this run makes its own batch, and the batch "
                   "fingerprints show whether it is the NPU step's".format(reason))
        logger.warning("NpuDumpHook: golden run for %s: %s", printable(target.path), printable(message))
        self.warnings.append("golden run: " + message)

    def replay_feeds(self, walk: Any, run_context: Any, guard: FailureGuard) -> Dict[Any, Any]:
        """At the captured step, before the restore: the hook's feeds of the NPU step's inputs (the
        script's own fed tensors are set in its feed_dict); ReplayError naming what cannot be fed."""
        if self.replay is None:
            return {}
        feeds = {}  # type: Dict[Any, Any]
        with guard("replaying the inputs of {}".format(self.target.path)):
            feeds = self.replay.feeds(walk.index.graph, run_context.original_args.feed_dict)
        return feeds

    def end_replay(self) -> None:
        """After the captured step: the script's feed_dict values as they were."""
        if self.replay is not None:
            self.replay.undo()

    def _replayed(self) -> Dict[str, Any]:
        if self.replay is not None:
            return self.replay.record()
        return {"count": 0, "bytes": 0, "tensors": [], "reason": self._not_replayed}

    def restore(self, session: Any, guard: FailureGuard) -> None:
        """Right before the captured step: the NPU bundle's checkpoint into the variables."""
        if self._restorer is None:
            return
        with guard("restoring the initial state from {}".format(self.target.path)):
            self._restorer.restore(session, self._prefix)
            logger.info("NpuDumpHook: initial state restored from %s", printable(self.target.path))
        shutil.rmtree(self._scratch, ignore_errors=True)

    def compare(self, section: Optional[Dict[str, Any]], randomness: Mapping[str, Any], run_context: Any,
                guard: FailureGuard) -> None:
        """After the captured step: this run's fingerprints against the NPU bundle's."""
        target = self.target
        if target is None:
            return
        comparison = compare(target.fingerprints, section)
        self.golden_for = dict(target.identity(), match=comparison.match, on_mismatch=self.on_mismatch,
                               differences=comparison.as_dict(), replayed=self._replayed())
        for note in comparison.notes:
            logger.warning("NpuDumpHook: golden run for %s: %s", printable(target.path), printable(note))
            self.warnings.append("golden run: " + note)
        if comparison.match:
            logger.info("NpuDumpHook: fingerprints match NPU bundle %s (%d variable(s), %d input(s))",
                        printable(target.path),
                        len((section or {}).get("state") or ()), len((section or {}).get("batch") or ()))
            return
        hints = _randomness_hints(target.randomness, randomness)
        if self.replay is None and self._not_replayed:
            hints.append("the NPU step's inputs were not replayed: " + self._not_replayed)
        message = comparison.message(target.path, hints)
        if self.on_mismatch == "warn":
            logger.warning("NpuDumpHook: %s (on_mismatch='warn': the golden bundle is written)", printable(message))
            self.warnings.append(message)
            return
        self.mismatch = FingerprintMismatchError(message, target.path, comparison.as_dict())
        guard.failures.append({"doing": "comparing the fingerprints with {}".format(target.path),
                               "error": "FingerprintMismatchError: " + message})
        run_context.request_stop()

    def describe(self) -> str:
        """For the announcement: the NPU bundle and whether the fingerprints matched."""
        if not self.golden_for:
            return "no NPU bundle"
        replayed = (self.golden_for.get("replayed") or {}).get("count") or 0
        return "for NPU bundle {} (fingerprints {}, {})".format(
            self.golden_for["path"], "match" if self.golden_for["match"] else "DIFFER",
            "{} input(s) replayed".format(replayed) if replayed else "inputs not replayed")


def golden_backend(backend: Any, initial_state: Any) -> Any:
    """``initial_state`` makes a golden run: ``"auto"`` becomes ``"reference"``. Another backend
    with it was refused before (:data:`npu_dump_hook.settings.HOOK_RULES`)."""
    return "reference" if initial_state is not None and backend == "auto" else backend


def _variables_message(target: str, diff: Mapping[str, Sequence[str]]) -> str:
    parts = []
    for key, words in (("missing", "of this graph are not in its checkpoint"),
                       ("extra", "of its checkpoint are not in this graph"),
                       ("mismatched", "of this graph have another shape there")):
        if diff[key]:
            names = list(diff[key])
            parts.append("{} variable(s) {}: {}{}".format(
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
