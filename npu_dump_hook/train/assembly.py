"""The hook's collaborators, built from its keywords: :class:`~npu_dump_hook.hook.NpuDumpHook`
decides *when*, and what it drives is assembled here, once, before training.

Contract::

    settings.check_hook_keywords(keywords)   # first: each keyword by its row, then the combination rules
    parts = assemble(options, keywords)      # every NpuDumpHook keyword as called, defaults included

Which keyword builds which collaborator (each an attribute of the hook)::

    keyword(s)                                   collaborator
    initial_state, restore_initial_state,        golden  GoldenRun (train/golden.py): the NPU bundle
      on_mismatch, replay_inputs                         opened, its kept inputs, its captured step and mode
    output_dir (+ RANK_ID, DEVICE_ID)            layout  RunLayout (run_record.py); facts RunFacts (train/record.py)
    options (None: NPU_DUMP_* or a data dump     dump    DumpRun (train/dump_run.py)
      into the run folder), backend,
      emulate_precision, emulate_profile,
      faults, reference, ranks, save_initial_state
    max_steps, mode (+ dump_step; the golden     steps   StepCounter (train/steps.py)
      run: the NPU bundle's step and mode)
    collect, bundle_dir, link, checksum,         output  BundleOutput (train/output.py)
      archive, force
    max_dump_size                                sizes   SizeCheck (train/sizing.py)
    max_input_bytes                              prints  StepFingerprints with a StepInputs (train/state.py)
    strict                                       guard   FailureGuard (train/guard.py)
    randomness, seed, graph_keyword, verbose     kept by the hook as given (begin(), run.json, end())

The order is the order of what each part needs: the golden run first (its NPU bundle decides the
backend, the captured step and the mode), then the layout (the default options dump into it), the
backend, the steps, the dump run; the output folders are checked writable last, so a folder the
run cannot write fails now, not after training.
"""
import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from ..backends import resolve_backend
from ..errors import OptionError
from ..options import DumpOptions
from ..run_record import RunLayout, rank_and_device
from .. import settings
from .dump_run import DumpRun, check_writable_dir, default_options
from .golden import GoldenRun, golden_backend
from .guard import FailureGuard
from .inputs import StepInputs
from .output import BundleOutput
from .record import RunFacts
from .sizing import SizeCheck
from .state import StepFingerprints
from .steps import StepCounter, run_steps

__all__ = ["HookParts", "assemble", "DEFAULT_OUTPUT_DIR"]

#: Where run folders go when ``output_dir`` is not given (relative to the working directory).
DEFAULT_OUTPUT_DIR = "npu_dump_hook_out"


@dataclass
class HookParts:
    """The collaborators of one hook (see the module doc for which keywords build which)."""

    facts: RunFacts
    layout: RunLayout
    golden: GoldenRun
    dump: DumpRun
    steps: StepCounter
    output: BundleOutput
    sizes: SizeCheck
    prints: StepFingerprints
    guard: FailureGuard


def assemble(options: Optional[DumpOptions], given: Mapping[str, Any]) -> HookParts:
    """The collaborators of a hook called with ``options`` and the keywords ``given`` (already
    checked by :func:`npu_dump_hook.settings.check_hook_keywords`); OptionError for what only
    building shows (a bundle that does not open, ``dump_step`` beyond ``max_steps``, a folder that
    is not writable)."""
    golden = GoldenRun.open(given["initial_state"], bool(given["restore_initial_state"]), given["on_mismatch"],
                            given["replay_inputs"])
    facts = RunFacts(rank_and_device())
    output_dir = os.path.abspath(given["output_dir"] or DEFAULT_OUTPUT_DIR)
    layout = RunLayout.new(output_dir, facts.ids["rank"])
    options = _options_or_default(options, layout)
    backend = resolve_backend(golden_backend(given["backend"], given["initial_state"]), given["emulate_precision"],
                              given["emulate_profile"], given["faults"])
    steps = StepCounter(*run_steps(given["max_steps"], options, golden.captured_step),
                        mode=golden.mode_for(given["mode"]))
    dump = DumpRun(layout, options, backend, given["reference"], given["ranks"], given["save_initial_state"])
    output = _output(given, output_dir, dump.dumping)
    max_dump_size = given["max_dump_size"]
    sizes = SizeCheck(None if max_dump_size is None else settings.parse_size(max_dump_size), output)
    inputs = None if dump.golden_only else StepInputs(layout.inputs_dir, given["max_input_bytes"])
    return HookParts(facts=facts, layout=layout, golden=golden, dump=dump, steps=steps, output=output, sizes=sizes,
                     prints=StepFingerprints(inputs), guard=FailureGuard(given["strict"]))


def _options_or_default(options: Optional[DumpOptions], layout: RunLayout) -> DumpOptions:
    options = options if options is not None else default_options(layout)
    if not isinstance(options, DumpOptions):
        raise OptionError("options", type(options).__name__, "must be a DumpOptions (or None)")
    return options


def _output(given: Mapping[str, Any], output_dir: str, dumping: bool) -> BundleOutput:
    """Where the bundle goes; on a rank that dumps, the output and bundle folders are made and
    checked writable now (like dump_path), remembering which of them this run created."""
    bundle_dir = os.path.abspath(given["bundle_dir"] or os.path.join(output_dir, "bundles"))
    made_dirs = [d for d in (bundle_dir, output_dir) if not os.path.exists(d)]
    if dumping:
        check_writable_dir("output_dir", given["output_dir"], output_dir)
        if given["collect"]:
            check_writable_dir("bundle_dir", given["bundle_dir"], bundle_dir)
    writer = {name: given[name] for name in ("link", "checksum", "archive", "force")}
    return BundleOutput(bool(given["collect"]) and dumping, bundle_dir, made_dirs, writer)
