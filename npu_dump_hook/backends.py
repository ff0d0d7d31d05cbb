"""Who writes the dump: the real NPU (GE) or the emulated NPU, behind one small protocol.

A backend object is what the hook drives; it never asks "which backend?" again::

    backend.name                    what bundle.json records ("npu" or "emulated")
    backend.captures                True: write_step() needs the capture of every dumped step
    backend.settles                 True: files may still be landing at end(); wait for them
    backend.begin(graph, options, device_id)     in hook.begin(), graph still editable
    backend.session_started()       after the session is created (GE names its time folder)
    backend.write_step(capture, step)            emulated only: the files of one dumped step
    backend.graph_dirs(device_id)   where this run's Build graph is; None: GE's default places
    backend.summary()               JSON-ready description for run.json, or None

:class:`RealNpu` (GE writes everything; the hook only configures and collects) and
:class:`~npu_dump_hook.emulator.EmulatedNpu` implement it. :func:`resolve_backend` turns the
user's ``backend=`` choice (:data:`~npu_dump_hook.constants.BACKEND_CHOICES`) into one.
"""
import os
from typing import Any, Dict, List, Optional

from . import _tf
from .constants import BACKEND_CHOICES
from .emulator.backend import EmulatedNpu
from .errors import BackendError, OptionError
from .locate import graph_search_dirs
from .options import DumpOptions

__all__ = ["RealNpu", "resolve_backend"]


class RealNpu(object):
    """The Ascend NPU: GE builds the graph and writes the dump from the session config's options."""

    name = "npu"
    captures = False
    settles = True

    def begin(self, tf_graph: Any, options: DumpOptions, device_id: int) -> None:
        """Nothing to do: the dump options travel in the session config (config wrappers)."""

    def session_started(self) -> None:
        """GE names its time folder itself."""

    def write_step(self, capture: Any, step: int) -> Dict[str, Any]:
        raise BackendError("the real NPU writes its own dump: RealNpu.write_step must not be called")

    def graph_dirs(self, device_id: int) -> Optional[List[str]]:
        """GE's graph folders for this process and card (DUMP_GRAPH_PATH, ASCEND_WORK_PATH, ...)."""
        return graph_search_dirs(pid=os.getpid(), device_id=str(device_id))

    def summary(self) -> Optional[Dict[str, Any]]:
        return None


def resolve_backend(backend: Any, emulate_precision: str = "fp32") -> Any:
    """The backend object for ``backend=``: a ready object is kept; ``"auto"`` is the real NPU
    when npu_bridge imports, else the emulator."""
    if isinstance(backend, (EmulatedNpu, RealNpu)):
        return backend
    if backend not in BACKEND_CHOICES:
        raise OptionError("backend", backend, "must be one of " + "|".join(BACKEND_CHOICES)
                          + ", an EmulatedNpu or a RealNpu")
    if backend == "npu" or (backend == "auto" and _tf.npu_bridge_available()):
        if not _tf.npu_bridge_available():
            raise OptionError("backend", backend, "needs npu_bridge (the Ascend TF adapter), which is not importable")
        return RealNpu()
    return EmulatedNpu(emulate_precision=emulate_precision)
