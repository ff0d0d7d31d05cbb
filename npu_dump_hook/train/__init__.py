"""The train-time collaborators :class:`~npu_dump_hook.hook.NpuDumpHook` drives; the hook decides *when*.

::

    walk.py      StepWalk: the ops one session.run executes (walked once per run call),
                 GraphIndex: a graph's edges, read once and kept
    steps.py     StepCounter: which runs are training steps, the captured step, max_steps
    guard.py     FailureGuard: strict / not strict, the failures list (run.json)
    dump_run.py  DumpRun: the backend, the capture, the initial-state checkpoint, the emulated dump
    golden.py    GoldenRun: restore from the NPU bundle, fingerprint comparison, on_mismatch
    state.py     StepFingerprints: the state and batch fingerprints of the captured step

Importing this package imports none of its modules (and no TensorFlow): import the module you need.
"""
__all__ = []  # type: list
