"""Who writes the dump: the real NPU (GE) or the emulated NPU, behind one small protocol.

A backend object is what the hook drives; it never asks "which backend?" again::

    backend.name                    what bundle.json records ("npu", "emulated", or "reference":
                                    the format's name of the golden backend)
    backend.captures                True: write_step() needs the capture of every dumped step
    backend.settles                 True: files may still be landing at end(); wait for them
    backend.golden_in_run           (optional, default True) False: this run's graph computes
                                    with NPU numerics, so its own tensors are no golden
                                    (EmulatedNpu with profile="ascend" or faults)
    backend.golden_only             (optional, default False) True: no dump at all, the run's
                                    product is the golden capture (GoldenOnly)
    backend.begin(graph, options, device_id)     in hook.begin(), graph still editable
    backend.session_started()       after the session is created (GE names its time folder)
    backend.write_step(capture, step)            emulated only: the files of one dumped step
    backend.step_time(now_us)       (optional) emulated only: the time a dumped step's file timestamps
                                    start from (one clock for the ranks of a multi-rank run)
    backend.graph_dirs(device_id)   where this run's Build graph is; None: GE's default places
    backend.summary()               JSON-ready description for run.json, or None

:class:`RealNpu` (GE writes everything; the hook only configures and collects),
:class:`~npu_dump_hook.emulator.EmulatedNpu` and :class:`GoldenOnly` (the golden run on
CPU/GPU: no dump, the hook's golden capture is the product) implement it.
:func:`resolve_backend` turns the user's ``backend=`` choice
(:data:`~npu_dump_hook.constants.BACKEND_CHOICES`; ``"reference"`` is an alias of ``"golden"``)
plus the emulator options into one; :func:`golden_capture_default` is what ``reference=None``
(capture the golden tensors?) means for a backend;
:func:`npu_output_missing` is the error of a backend-``npu`` run that found no GE output (npu_bridge
imports, so ``"auto"`` chose the real NPU, but no GE ran): it says why ``npu`` was chosen, where GE's
output was expected and how to use the emulator instead.
"""
import os
from typing import Any, Dict, List, Mapping, Optional

from . import _tf
from .constants import BACKEND_CHOICES, RECORDED_GOLDEN_BACKEND
from .emulator import backend as emulator_backend
from .emulator.backend import EmulatedNpu
from .errors import BackendError, LocateError, OptionError
from .locate import graph_search_dirs
from .options import DumpOptions
from .settings import GOLDEN_BACKEND, canonical

__all__ = ["RealNpu", "GoldenOnly", "resolve_backend", "golden_capture_default", "golden_in_run",
           "npu_output_missing", "ReferenceOnly", "reference_default"]


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


class GoldenOnly(object):
    """The golden run: no NPU and no dump; the hook's golden capture writes ``golden/``."""

    name = RECORDED_GOLDEN_BACKEND
    captures = False
    settles = False
    golden_in_run = True
    golden_only = True

    def begin(self, tf_graph: Any, options: DumpOptions, device_id: int) -> None:
        """Nothing to configure: no dump is written."""

    def session_started(self) -> None:
        """No dump folder to name."""

    def write_step(self, capture: Any, step: int) -> Dict[str, Any]:
        raise BackendError("the golden backend writes no dump: GoldenOnly.write_step must not be called")

    def graph_dirs(self, device_id: int) -> Optional[List[str]]:
        return None

    def summary(self) -> Optional[Dict[str, Any]]:
        return None


def golden_in_run(backend: Any) -> bool:
    """False when the backend's graph computes with NPU numerics (its tensors are no golden)."""
    return bool(getattr(backend, "golden_in_run", True))


def golden_capture_default(backend: Any) -> bool:
    """``reference=None`` (capture the golden tensors?): on for the golden-only backend, else when
    the backend captures (the emulator) and its run computes CPU numerics (:func:`golden_in_run`)."""
    if getattr(backend, "golden_only", False):
        return True
    return bool(backend.captures) and golden_in_run(backend)


#: The older names, kept: ``ReferenceOnly`` is :class:`GoldenOnly`, ``reference_default`` is
#: :func:`golden_capture_default`.
ReferenceOnly = GoldenOnly
reference_default = golden_capture_default


def resolve_backend(backend: Any, emulate_precision: str = "fp32", profile: Optional[str] = None,
                    faults: Optional[Mapping[str, str]] = None) -> Any:
    """The backend object for ``backend=``: a ready object is kept; ``"auto"`` is the real NPU
    when npu_bridge imports, else the emulator; ``"golden"`` (or its alias ``"reference"``) is
    :class:`GoldenOnly`.

    ``profile`` (``emulate_profile=`` of the hook: ``"exact"``/``"ascend"``, None: the
    emulator's default) and ``faults`` (``{"op name": spec}``) configure the emulator and are
    an OptionError with any other backend, or with a ready object (configure it instead).
    """
    emulator_options = profile is not None or bool(faults)
    if isinstance(backend, (EmulatedNpu, RealNpu, GoldenOnly)):
        if emulator_options:
            raise OptionError("emulate_profile" if profile is not None else "faults", profile or faults,
                              "configure the {} object you pass as backend= instead".format(type(backend).__name__))
        return backend
    if backend not in BACKEND_CHOICES:
        raise OptionError("backend", backend, "must be one of " + "|".join(BACKEND_CHOICES)
                          + ", an EmulatedNpu, a RealNpu or a GoldenOnly")
    backend = canonical("backend", backend)
    if backend == GOLDEN_BACKEND:
        _no_emulator_options(backend, profile, faults)
        return GoldenOnly()
    if backend == "npu" or (backend == "auto" and _tf.npu_bridge_available()):
        if not _tf.npu_bridge_available():
            raise OptionError("backend", backend, "needs npu_bridge (the Ascend TF adapter), which is not importable")
        _no_emulator_options("npu", profile, faults)
        return RealNpu()
    return _emulator(emulate_precision, profile, faults)


def _no_emulator_options(backend: str, profile: Optional[str], faults: Any) -> None:
    if profile is not None:
        raise OptionError("emulate_profile", profile, "applies to the emulated backend only, not {!r}".format(backend))
    if faults:
        raise OptionError("faults", faults, "apply to the emulated backend only, not {!r}".format(backend))


def _emulator(emulate_precision: str, profile: Optional[str], faults: Optional[Mapping[str, str]]) -> Any:
    """``EmulatedNpu(emulate_precision, profile=, faults=)``; the two keywords are passed only when set."""
    kwargs = {}  # type: Dict[str, Any]
    if profile is not None:
        profiles = getattr(emulator_backend, "PROFILES", ("exact",))
        if profile not in profiles:
            raise OptionError("emulate_profile", profile, "must be one of " + "|".join(profiles))
        kwargs["profile"] = profile
    if faults:
        if not isinstance(faults, Mapping):
            raise OptionError("faults", faults, 'must be a mapping {"op name": "scale=1.05" | ...}')
        kwargs["faults"] = dict(faults)
    try:
        return EmulatedNpu(emulate_precision=emulate_precision, **kwargs)
    except TypeError as exc:  # an EmulatedNpu without the profile/faults keywords
        option, key = ("emulate_profile", "profile") if "profile" in kwargs else ("faults", "faults")
        raise OptionError(option, kwargs[key], "this EmulatedNpu does not accept it yet ({})".format(exc))


def npu_output_missing(error: LocateError, dump_path: str) -> LocateError:
    """``error`` (collecting a backend-``npu`` run found no Build graph: no GE ran) completed with
    why backend ``npu`` was chosen, where GE's output was expected and how to emulate instead.

    Same ``what`` and ``searched`` as ``error``; collection raises it for ``backend == "npu"`` runs.
    """
    origin = _tf.npu_bridge_origin()
    message = (
        "{}. Backend 'npu' was chosen because npu_bridge imported{} and backend='auto' (the default) then "
        "picks the real NPU, so GE was expected to write its Build graph (ge_proto_*_Build.txt) into the graph "
        "folders searched and the dump under dump_path {}; none is there, as when npu_bridge imports on a "
        "machine without an Ascend NPU and CANN (or is a stand-in). To use the emulated NPU instead: "
        'backend="emulated" (NpuDumpHook / NpuDumpSession) or --backend emulated (npu-dump-hook run)'.format(
            str(error).rstrip("."), "" if origin is None else " (from {})".format(origin), dump_path))
    return LocateError(message, error.searched, error.what)
