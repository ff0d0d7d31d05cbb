"""The run folder of one hooked run, and the record the hook hands to collection.

Run folder layout (``output_dir`` defaults to ``./npu_dump_hook_out``)::

    {output_dir}/{YYYYMMDDHHMMSS}_{pid}[_rank{RANK_ID}]/
        graph/           DUMP_GRAPH_PATH of this run, unless the user set one
        dump/            dump_path, when the options did not name one
        tf/graph.pbtxt   the TF graph as the hook saw it (after randomness edits)
        init/model.ckpt* initial-state checkpoint (save_initial_state=True)
        golden/          reference (golden) .npy files and golden_manifest.json
        .initial_state/  golden run from an archived NPU bundle: its data/init/ extracted
        .capture/        scratch of the tensor capture (removed when done)
        run.json         the run summary, written atomically by the hook's end()

:class:`RunLayout` owns those names; :class:`RunRecord` is what a run was, frozen at
``end()``: collection reads the record, never the hook. ``RunRecord.run_section()`` is the
one definition of the ``run`` section of ``bundle.json`` (post-hoc collection builds its
section with :func:`run_section` too). The section's shape (:data:`RUN_SECTION_KEYS`,
:func:`run_section`) belongs to the bundle format: :mod:`npu_dump_hook.bundle.schema`,
re-exported here.
"""
import datetime
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from ._atomic import atomic_write_bytes
from .bundle.schema import RUN_SECTION_KEYS, run_section
from .constants import ENV_ASCEND_DEVICE_ID, ENV_DEVICE_ID, ENV_RANK_ID
from .errors import OptionError
from .options import DumpOptions

__all__ = ["RunLayout", "RunRecord", "RUN_SECTION_KEYS", "RUN_JSON", "run_section", "iso_time", "rank_and_device",
           "dumps_on_this_rank"]

RUN_JSON = "run.json"
GRAPH_DIR, DUMP_DIR, TF_DIR, TF_GRAPH_FILE = "graph", "dump", "tf", "graph.pbtxt"
INIT_DIR, INIT_CHECKPOINT_PREFIX, GOLDEN_DIR, CAPTURE_DIR = "init", "model.ckpt", "golden", ".capture"
TARGET_SCRATCH_DIR = ".initial_state"
#: The captured step's input values (``.npy``), bundled as ``data/inputs/`` (input replay).
INPUTS_DIR = "inputs"
#: Further keys a hooked run records in its ``run`` section.
_RUN_EXTRA_KEYS = ("mode", "max_steps", "captured_step", "graph_dump_env", "tf_version", "emulator", "reference",
                   "environment", "size")


@dataclass(frozen=True)
class RunLayout:
    """Paths of one run folder (see the module docstring)."""

    root: str

    @classmethod
    def new(cls, output_dir: str, rank: Optional[int], now: Optional[datetime.datetime] = None,
            pid: Optional[int] = None) -> "RunLayout":
        stamp = (now or datetime.datetime.now()).strftime("%Y%m%d%H%M%S")
        name = "{}_{}".format(stamp, os.getpid() if pid is None else pid)
        if rank is not None:
            name += "_rank{}".format(rank)
        return cls(os.path.join(os.path.abspath(output_dir), name))

    @property
    def name(self) -> str:
        return os.path.basename(self.root)

    @property
    def graph_dir(self) -> str:
        return os.path.join(self.root, GRAPH_DIR)

    @property
    def dump_dir(self) -> str:
        return os.path.join(self.root, DUMP_DIR)

    @property
    def tf_dir(self) -> str:
        return os.path.join(self.root, TF_DIR)

    @property
    def tf_graph(self) -> str:
        return os.path.join(self.root, TF_DIR, TF_GRAPH_FILE)

    @property
    def init_prefix(self) -> str:
        return os.path.join(self.root, INIT_DIR, INIT_CHECKPOINT_PREFIX)

    @property
    def golden_dir(self) -> str:
        return os.path.join(self.root, GOLDEN_DIR)

    @property
    def inputs_dir(self) -> str:
        return os.path.join(self.root, INPUTS_DIR)

    @property
    def capture_dir(self) -> str:
        return os.path.join(self.root, CAPTURE_DIR)

    @property
    def target_scratch_dir(self) -> str:
        return os.path.join(self.root, TARGET_SCRATCH_DIR)

    @property
    def run_json(self) -> str:
        return os.path.join(self.root, RUN_JSON)


def iso_time(stamp: Optional[float]) -> Optional[str]:
    """Epoch seconds as local ISO 8601 with offset, to the second."""
    if stamp is None:
        return None
    return datetime.datetime.fromtimestamp(stamp).astimezone().isoformat(timespec="seconds")


@dataclass(frozen=True)
class RunRecord:
    """One hooked run as it ended. ``started``/``ended`` are epoch seconds."""

    layout: RunLayout
    options: DumpOptions
    backend: str
    started: float
    ended: float
    steps: int
    max_steps: int
    captured_step: int
    global_step: Mapping[str, Optional[int]]
    rank: Optional[int]
    device_id: int
    randomness: Mapping[str, Any]
    graph_dump_env: Mapping[str, Any]
    tf_version: str
    initial_state: Optional[str] = None
    emulator: Optional[Mapping[str, Any]] = None
    reference: Optional[Mapping[str, Any]] = None
    #: Op names of the TF graph before the hook added its own (graph selection by name).
    tf_op_names: Tuple[str, ...] = ()
    #: Where this run's Build graph is (the emulator's folder); None: GE's default places.
    graph_dirs: Optional[Tuple[str, ...]] = None
    #: GE writes asynchronously (real NPU): collection waits for the dump to settle first.
    settle: bool = False
    graph_keyword: Optional[str] = None
    #: State and batch fingerprints of the captured step (:mod:`npu_dump_hook.fingerprints`).
    fingerprints: Optional[Mapping[str, Any]] = None
    #: Golden run: the NPU bundle it was made for (identity and comparison).
    golden_for: Optional[Mapping[str, Any]] = None
    #: No dump at all (the reference backend): the bundle holds the golden tensors only.
    golden_only: bool = False
    #: What the run noticed that the bundle's ``warnings`` must carry.
    warnings: Tuple[str, ...] = ()
    #: The captured step's inputs kept for a golden run's replay (bundle.json ``inputs``).
    inputs: Optional[Mapping[str, Any]] = None
    #: What the run ran on (:mod:`npu_dump_hook.environment`; bundle.json ``run.environment``).
    environment: Optional[Mapping[str, Any]] = None
    #: Which kind of iteration was captured: ``train`` or ``infer`` (online inference).
    mode: str = "train"
    #: The dump's size estimated before the dumped step and as written (:mod:`npu_dump_hook.train.sizing`).
    size: Optional[Mapping[str, Any]] = None
    #: Which executed ops of the captured step sit in control flow (:mod:`npu_dump_hook.train.control_flow`).
    control_flow: Optional[Mapping[str, Any]] = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def golden_dir(self) -> Optional[str]:
        """The golden folder when this run captured one."""
        return self.layout.golden_dir if os.path.isdir(self.layout.golden_dir) else None

    @property
    def inputs_dir(self) -> Optional[str]:
        """The folder of the kept input values when this run kept any."""
        return self.layout.inputs_dir if self.inputs and os.path.isdir(self.layout.inputs_dir) else None

    @property
    def init_dir(self) -> Optional[str]:
        return os.path.dirname(self.initial_state) if self.initial_state else None

    def run_section(self) -> Dict[str, Any]:
        """The ``run`` section of this run's bundle.json."""
        values = self.summary()
        return run_section(**{key: values[key] for key in RUN_SECTION_KEYS + _RUN_EXTRA_KEYS})

    def summary(self) -> Dict[str, Any]:
        """The content of ``run.json``."""
        summary = {
            "mode": self.mode, "steps": self.steps, "max_steps": self.max_steps, "captured_step": self.captured_step,
            "global_step": dict(self.global_step), "started": iso_time(self.started), "ended": iso_time(self.ended),
            "rank": self.rank, "device_id": self.device_id, "run_dir": self.layout.root,
            "options": self.options.as_dict(), "graph_dump_env": dict(self.graph_dump_env),
            "initial_state": self.initial_state, "backend": self.backend, "emulator": self.emulator,
            "reference": self.reference, "randomness": self.randomness, "tf_version": self.tf_version,
            "fingerprints": self.fingerprints, "golden_for": self.golden_for, "warnings": list(self.warnings),
            "inputs": self.inputs,
            "environment": self.environment, "size": self.size, "control_flow": self.control_flow,
        }
        summary.update(self.extra)
        return summary

    def write(self) -> str:
        """Write ``run.json`` atomically (a reader never sees half of it); returns its path."""
        data = json.dumps(self.summary(), indent=2, sort_keys=True, default=str).encode("utf-8") + b"\n"
        atomic_write_bytes(self.layout.run_json, data)
        return self.layout.run_json


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


def dumps_on_this_rank(ranks: Optional[Sequence[int]], environ: Optional[Dict[str, str]] = None) -> bool:
    """Whether this process dumps under ``ranks=`` (None: every rank; no RANK_ID: yes)."""
    rank = rank_and_device(environ)["rank"]
    return ranks is None or rank is None or rank in set(ranks)
