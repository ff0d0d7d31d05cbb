"""What a run was, frozen at ``end()`` into a :class:`~npu_dump_hook.run_record.RunRecord`.

Contract::

    facts = RunFacts(rank_and_device())    # assembly: the hook fills it in as the run goes
    facts.started, facts.randomness, facts.tf_op_names, facts.global_step_tensor   # begin()
    facts.session_config, facts.global_step_before    # after_create_session() (or the first step)
    record = freeze(hook, ended, global_step_after)   # end(): run.json and collection read it

:func:`freeze` reads the hook's public attributes and its collaborators (``steps``, ``dump``,
``golden``, ``prints``, ``sizes``, ``facts``); it never fails on the ``environment`` section
(a warning, and the section is None).
"""
import logging
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .. import _tf, environment
from .._inert import printable
from ..run_record import RunRecord
from .guard import HOOK_LOGGER

__all__ = ["RunFacts", "freeze"]

logger = logging.getLogger(HOOK_LOGGER)


@dataclass
class RunFacts:
    """What the hook learns about its run as it goes, for run.json (see the module doc)."""

    #: ``{"rank", "device_id"}`` of this process (RANK_ID, DEVICE_ID).
    ids: Dict[str, Any]
    #: Wall-clock time (epoch seconds) of ``begin()``: dump folders older than this are stale.
    started: Optional[float] = None
    #: The randomness policy's report (:func:`npu_dump_hook.determinism.apply_policy`).
    randomness: Dict[str, Any] = field(default_factory=dict)
    #: The model graph's op names at ``begin()``, before the hook's own ops.
    tf_op_names: List[str] = field(default_factory=list)
    global_step_tensor: Any = None
    global_step_before: Optional[int] = None
    #: The session's ConfigProto (``after_create_session``).
    session_config: Any = None


def freeze(hook: Any, ended: float, global_step_after: Optional[int]) -> RunRecord:
    """The :class:`RunRecord` of ``hook``'s run, ended at ``ended`` (epoch seconds)."""
    dump, steps, facts, prints = hook.dump, hook.steps, hook.facts, hook.prints
    inputs = prints.inputs
    return RunRecord(
        layout=hook.layout, options=hook.options, backend=hook.backend_name,
        started=facts.started or ended, ended=ended, steps=steps.steps_run, max_steps=steps.max_steps,
        captured_step=steps.captured_step,
        global_step={"before": facts.global_step_before, "after": global_step_after},
        rank=facts.ids["rank"], device_id=facts.ids["device_id"], randomness=facts.randomness,
        graph_dump_env=dump.graph_env, tf_version=_tf.tf_version(), initial_state=dump.initial_state_path,
        emulator=dump.emulator_summary(), reference=dump.reference_report,
        tf_op_names=tuple(facts.tf_op_names), graph_dirs=dump.graph_dirs(facts.ids["device_id"]),
        settle=hook.backend.settles, graph_keyword=hook.graph_keyword, fingerprints=prints.section(steps.captured_step),
        golden_for=hook.golden.golden_for, golden_only=hook.golden_only,
        warnings=tuple(hook.warnings) + tuple(inputs.warnings if inputs else ()) + tuple(hook.sizes.warnings),
        inputs=inputs.section if inputs else None, environment=_environment(facts, dump),
        mode=steps.mode.recorded, size=hook.sizes.section(dump), control_flow=dump.control_flow(),
        extra={"failures": list(hook.failures), "counted_steps": list(steps.counted_steps),
               "skipped_runs": dict(steps.skipped_runs)},
    )


def _environment(facts: RunFacts, dump: Any) -> Optional[Dict[str, Any]]:
    """The ``run.environment`` section; None (and a warning) when it cannot be read: a record
    never stops the run."""
    try:
        return environment.capture(_tf.tf_version(), facts.session_config, dump.emulator_summary())
    except Exception as exc:  # noqa: BLE001 - see docstring
        logger.warning("npu_dump_hook: the run's environment was not recorded: %s", printable(exc))
        return None
