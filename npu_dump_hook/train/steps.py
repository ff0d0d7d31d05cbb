"""Which runs are training steps, which one is captured, and when the run stops.

Contract::

    steps = StepCounter(max_steps, captured_step, mode)  # numbers and mode fixed at construction
    steps.begin(graph, index)                          # the detector, over the graph's one index
    walk = steps.start_run(run_context)                # before_run: the run's StepWalk, or None
    steps.at_captured_step                             #   (not a training step: logged, not counted)
    steps.end_run(run_context)                         # after_run: count; request_stop() at max_steps

A run counts when it updates a trainable variable or the global step
(:mod:`npu_dump_hook.train.training_step`), or, in inference (``mode="infer"``, or ``"auto"`` in a
script that never trains), when it runs the model on an input batch
(:mod:`npu_dump_hook.train.inference`); ``counted_steps`` and ``skipped_runs`` go to run.json. The
numbers: :func:`run_steps`, that is :func:`dump_run_steps` (``max_steps`` and ``dump_step`` of a dump run) and
:func:`golden_run_steps` (a golden run takes the NPU bundle's captured step).
"""
import logging
from typing import Any, Dict, List, Optional, Tuple  # noqa: F401 (type comments)

from .. import _tf
from ..errors import OptionError
from ..options import DumpOptions
from .training_step import TrainingStepDetector
from .guard import HOOK_LOGGER
from .inference import InferenceDetector, InferenceVerdict, ModeChoice, script_trains
from .walk import GraphIndex, StepWalk

__all__ = ["StepCounter", "run_steps", "dump_run_steps", "golden_run_steps", "read_global_step"]

logger = logging.getLogger(HOOK_LOGGER)
_EXAMPLES = 3


class StepCounter(object):
    """Counts training steps and tells the captured one (see the module doc)."""

    def __init__(self, max_steps: int, captured_step: int, mode: str = "auto") -> None:
        self.max_steps = max_steps
        #: Which rule counts runs: ``mode`` resolved (``auto`` at the first training or inference run).
        self.mode = ModeChoice(mode)
        self.captured_step = captured_step
        #: Training steps run so far.
        self.steps_run = 0
        #: The training steps counted: ``{"step", "fetches", "updates"}`` each (also in run.json).
        self.counted_steps = []  # type: List[Dict[str, Any]]
        #: Runs that were not training steps: how many, and the fetches of the first few.
        self.skipped_runs = {"count": 0, "examples": []}  # type: Dict[str, Any]
        self.counting = False
        #: Above 0 while the runner marks runs that are no inference iteration under ``auto``
        #: (Keras ``predict``/``evaluate`` of a script that may still train: runner/_sessions.py).
        self.inference_held = 0
        self._detector = None  # type: Any
        self._inference = None  # type: Any

    def begin(self, graph: Any, index: GraphIndex) -> None:
        self._detector = TrainingStepDetector(graph, index)
        self._inference = InferenceDetector(graph)

    @property
    def at_captured_step(self) -> bool:
        return self.steps_run == self.captured_step

    def start_run(self, run_context: Any) -> Optional[StepWalk]:
        """The run's walk when it is the iteration's kind (a training step, or an inference run:
        ``mode``), counted; else None (logged as skipped)."""
        args = run_context.original_args
        walk = self._detector.walk(args.fetches, args.feed_dict)
        verdict = self._detector.verdict_for(walk)
        if self.mode.chosen != "train":
            verdict = self._inference_verdict(walk, verdict)
        counts = getattr(verdict, "training", None) if self.mode.chosen == "train" else verdict.iteration
        self.counting = bool(counts)
        if not self.counting:
            self._note_skipped(verdict)
            return None
        self.counted_steps.append(dict(verdict.as_dict(), step=self.steps_run))
        return walk

    def _inference_verdict(self, walk: StepWalk, training: Any) -> Any:
        """The inference verdict (infer, or auto not yet decided), or ``training`` once auto chose train."""
        if self.mode.chosen is None and training.training:
            return self._decided(training, None)  # a training run decides auto: no inference verdict needed
        inference = self._inference.verdict_for(walk)
        if inference.iteration and self.inference_held and self.mode.requested == "auto":
            inference = InferenceVerdict(False, "Keras predict/evaluate under mode auto (--mode infer dumps it)",
                                         inference.inputs, inference.model, inference.fetches, inference.restore)
        return self._decided(training, inference)

    def _decided(self, training: Any, inference: Any) -> Any:
        """``mode`` decided by this run's verdicts (``inference`` None: a training run, which
        decides ``train`` whatever its inference verdict), and the verdict that counts."""
        before = self.mode.chosen
        chosen = self.mode.decide(training.training, inference is not None and inference.iteration,
                                  self._graph_trains)
        if chosen != before:
            logger.info("NpuDumpHook: mode=auto: %s", "the script trains: training steps are dumped"
                        if chosen == "train" else "the script built no training op: the first inference run is dumped")
        return training if chosen == "train" else inference

    def _graph_trains(self) -> bool:
        return script_trains(self._detector)

    def nothing_counted(self) -> str:
        """Why there is no iteration to bundle (the error text when no run counted)."""
        count, examples = self.skipped_runs["count"], self.skipped_runs["examples"] or "none"
        if self.mode.chosen == "infer":
            return "no inference iteration ran: {} run(s) ran the model on no input batch (fetches {}), so there " \
                   "is no iteration to bundle".format(count, examples)
        if self.mode.chosen is None and self.mode.requested == "auto":
            return "no training step ran and no inference iteration: {} run(s) updated no trainable variable and " \
                   "ran the model on no input batch (fetches {}), so there is no iteration to bundle".format(
                       count, examples)
        return "no training step ran: {} run(s) updated no trainable variable (fetches {}), so there is no " \
               "iteration to bundle".format(self.skipped_runs["count"], self.skipped_runs["examples"] or "none")

    def end_run(self, run_context: Any) -> None:
        self.steps_run += 1
        if self.steps_run >= self.max_steps:
            run_context.request_stop()

    def _note_skipped(self, verdict: Any) -> None:
        self.skipped_runs["count"] += 1
        if len(self.skipped_runs["examples"]) < _EXAMPLES:
            self.skipped_runs["examples"].append(verdict.fetches[:5])
        if hasattr(verdict, "iteration"):
            logger.info("NpuDumpHook: run of %s is not %san inference iteration (%s): not counted, not dumped",
                        ", ".join(verdict.fetches[:5]) or "nothing",
                        "a training step (it updates no trainable variable) nor " if self.mode.chosen is None else "",
                        verdict.reason)
            return
        logger.info("NpuDumpHook: run of %s is not a training step (it updates no trainable variable): "
                    "not counted, not dumped", ", ".join(verdict.fetches[:5]) or "nothing")


def run_steps(max_steps: Optional[int], options: DumpOptions, golden_step: Optional[int]) -> Tuple[int, int]:
    """``(max_steps, captured step)``: a golden run's (``golden_step``: the NPU bundle's), else a dump run's."""
    if golden_step is not None:
        return golden_run_steps(max_steps, golden_step)
    return dump_run_steps(max_steps, options)


def dump_run_steps(max_steps: Optional[int], options: DumpOptions) -> Tuple[int, int]:
    """``(max_steps, captured step)`` of a dump run: enough steps for ``dump_step``, and its first step."""
    ranges = options.step_ranges() if options.enable_dump else []
    last = max((end for _, end in ranges), default=0)
    if max_steps is None:
        if last:
            logger.info("NpuDumpHook: dump_step=%r: running %d training steps to reach its last step",
                        options.dump_step, last + 1)
        max_steps = last + 1
    elif last >= max_steps:
        raise OptionError("max_steps", max_steps, "dump_step={!r} selects step {}, but max_steps={} runs steps "
                          "0..{}: raise max_steps or leave it unset".format(options.dump_step, last, max_steps,
                                                                           max_steps - 1))
    return max_steps, _first_captured_step(options, max_steps)


def _first_captured_step(options: DumpOptions, max_steps: int) -> int:
    """The first local step (0-based) the dump covers; checked against max_steps now."""
    if not options.enable_dump:
        return 0
    for step in range(max_steps):
        if options.dumps_step(step):
            return step
    raise OptionError("dump_step", options.dump_step, "selects no step this run takes: max_steps={} runs steps "
                                                      "0..{}".format(max_steps, max_steps - 1))


def golden_run_steps(max_steps: Optional[int], captured: int) -> Tuple[int, int]:
    """``(max_steps, captured step)`` of a golden run: the NPU bundle's step, and enough steps to reach it."""
    if max_steps is None:
        return captured + 1, captured
    if max_steps <= captured:
        raise OptionError("max_steps", max_steps, "the NPU bundle captured step {}: a golden run needs at least {} "
                                                  "step(s)".format(captured, captured + 1))
    return max_steps, captured


def read_global_step(tensor: Any, session: Any) -> Optional[int]:
    """The global step's value; None without one or before it is initialized (a plain session
    wrapped before ``sess.run(init)``)."""
    if tensor is None:
        return None
    try:
        return int(session.run(tensor))
    except _tf.tf_v1().errors.FailedPreconditionError:
        return None
