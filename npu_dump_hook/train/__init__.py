"""The train-time collaborators :class:`~npu_dump_hook.hook.NpuDumpHook` drives; the hook decides *when*.

::

    assembly.py        assemble(options, keywords): the hook's keywords (checked by the settings
                       table) turned into the collaborators below, once, before training
    walk.py            StepWalk: the ops one session.run executes (walked once per run call),
                       GraphIndex: a graph's edges, read once and kept
    training_step.py   TrainingStepDetector: which session.run calls are training steps
    steps.py           StepCounter: which runs are training steps, the captured step, max_steps
    guard.py           FailureGuard: strict / not strict, the failures list (run.json)
    capture.py         TensorCapture: the tensor capture engine (fetch or stream); its graph plan
                       (_capture_plan.py), derived outputs (_capture_derive.py), variable reads (_capture_reads.py),
                       results (_capture_results.py),
                       loop iterations (_capture_loops.py), the step's file writes (_capture_write.py)
    golden_capture.py  ReferenceCapture, golden_report: the golden .npy folder and its manifest
    collector.py       CollectorPause: Python's cyclic collector paused for a captured step's window
    fingerprints.py    state and batch fingerprints (sha256 per variable / input) and their comparison
    dump_run.py        DumpRun: the backend, the capture, the initial-state checkpoint, the emulated dump
    golden.py          GoldenRun: restore from the NPU bundle, fingerprint comparison, on_mismatch
    state.py           StepFingerprints: the state and batch fingerprints of the captured step
    inputs.py          StepInputs: the captured step's input values kept for the golden run's replay
    replay.py          InputReplay: the golden run feeds those values into the same tensors
    late.py            LateGraph: what a plain session's script built after begin(), taken in at
                       the captured step (variables, tf/graph.pbtxt, random sources)
    sizing.py          SizeCheck: the dump's size estimated before the step, against free space
                       and max_dump_size (refused: nothing of the run left behind)
    output.py          BundleOutput: where the bundle goes and how it is written (collect_run)
    record.py          RunFacts (what begin() and the session learned), freeze(): run.json's RunRecord
    report.py          the end-of-run summary lines; the warning for a hook that never began

Imports run one way: modules here import the layers below (``_tf``, ``errors``, ``constants``,
``options``, ``config``, ``determinism``, ``backends``, ``run_record``, ``golden_run``, ``collect``,
``environment``, ``bundle``, ``formats``) and
each other; nothing below imports ``train``. The old top-level paths
``npu_dump_hook.fingerprints``, ``npu_dump_hook.training_step``, ``npu_dump_hook.reference`` and
``npu_dump_hook._capture`` are the same module objects as ``fingerprints``, ``training_step``,
``golden_capture`` and ``capture`` here.

Importing this package imports none of its modules (and no TensorFlow): import the module you need.
"""
__all__ = []  # type: list
