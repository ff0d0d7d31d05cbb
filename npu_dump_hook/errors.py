"""Every exception npu_dump_hook raises, under one root.

Each class also inherits the builtin that matches its meaning, so callers that
already catch ``ValueError`` or ``FileNotFoundError`` keep working::

    NpuDumpError
    ├── OptionError            (ValueError)         bad option value: option, value, rule
    ├── FormatError            (ValueError)         malformed artefact: path, offset, rule
    │   ├── DumpFileError                           binary dump file
    │   ├── GraphFormatError                        ge_proto_*.txt graph text
    │   ├── NameFormatError                         dump / graph file names, mapping.csv
    │   └── StatsFormatError                        stats CSV, Opdebug files
    ├── RandomnessError        (RuntimeError)       randomness policy "error" found random ops
    ├── BackendError           (RuntimeError)       the dump backend could not do its job
    ├── DumpSizeError          (RuntimeError)       the dump would not fit or exceeds max_dump_size
    ├── FingerprintMismatchError (RuntimeError)     golden run: not the NPU run's state or batch
    ├── ReplayError            (RuntimeError)       golden run: an NPU input value cannot be fed here
    ├── CompareError           (RuntimeError)       compare could not read or match its inputs
    ├── TwoPhaseError          (RuntimeError)       a pass of run --two-phase failed
    ├── LocateError            (FileNotFoundError)  graph or dump folder of this run not found
    │   └── AmbiguousGraphError                     several candidate graphs, no rule decides
    └── BundleError            (RuntimeError)       bundle could not be written or read
        ├── BundleExistsError  (FileExistsError)    destination exists and --force not given
        └── UnsafePathError    (ValueError)         a path escapes its root (archive member, mapping name)

Every error carries its fields as attributes, renders them in ``str()`` and
survives ``pickle`` (so it crosses process pools unchanged).
"""
from typing import Any, Dict, Optional

__all__ = [
    "NpuDumpError",
    "OptionError",
    "FormatError",
    "DumpFileError",
    "GraphFormatError",
    "NameFormatError",
    "StatsFormatError",
    "TwoPhaseError",
    "RandomnessError",
    "BackendError",
    "DumpSizeError",
    "CompareError",
    "FingerprintMismatchError",
    "ReplayError",
    "LocateError",
    "AmbiguousGraphError",
    "BundleError",
    "BundleExistsError",
    "UnsafePathError",
]


def _rebuild(cls: type, args: tuple, state: Dict[str, Any]) -> BaseException:
    err = cls.__new__(cls)
    BaseException.__init__(err, *args)
    err.__dict__.update(state)
    return err


class NpuDumpError(Exception):
    """Root of all npu_dump_hook errors."""

    def __reduce__(self):  # type: ignore[override]
        # Subclasses take keyword fields; rebuild from args + attributes instead of cls(*args).
        return (_rebuild, (self.__class__, self.args, dict(self.__dict__)))

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else self.__class__.__name__


class OptionError(NpuDumpError, ValueError):
    """An option value breaks a rule. ``option``, ``value`` and ``rule`` say which."""

    def __init__(self, option: str, value: Any, rule: str) -> None:
        super().__init__("option {}={!r}: {}".format(option, value, rule))
        self.option = option
        self.value = value
        self.rule = rule


class FormatError(NpuDumpError, ValueError):
    """A file does not follow its format. ``path``, ``offset`` (bytes, or None) and ``rule``."""

    def __init__(self, path: Any, rule: str, offset: Optional[int] = None) -> None:
        where = str(path) if offset is None else "{} at byte {}".format(path, offset)
        super().__init__("{}: {}".format(where, rule))
        self.path = str(path)
        self.offset = offset
        self.rule = rule


class DumpFileError(FormatError):
    """A binary dump data file is malformed."""


class GraphFormatError(FormatError):
    """A GE graph dump (ge_proto_*.txt) is malformed."""


class NameFormatError(FormatError):
    """A dump or graph file name, or a mapping.csv line, does not follow the grammar."""


class StatsFormatError(FormatError):
    """A stats CSV or an Opdebug overflow file is malformed."""


class RandomnessError(NpuDumpError, RuntimeError):
    """Randomness policy ``error`` found random sources; ``ops`` lists (name, type) pairs."""

    def __init__(self, message: str, ops: Any = ()) -> None:
        super().__init__(message)
        self.ops = list(ops)


class BackendError(NpuDumpError, RuntimeError):
    """The dump backend (real GE, emulator, reference capture) failed."""


class DumpSizeError(NpuDumpError, RuntimeError):
    """The estimated dump would not fit the free space or exceeds ``max_dump_size``: refused before
    the dumped step. ``path`` is the folder that lacks room (None for max_dump_size), ``limit`` the
    bytes it allows (free space or max_dump_size), ``estimate`` the estimate (a dict, bytes)."""

    def __init__(self, message: str, path: Optional[str] = None, limit: Optional[int] = None,
                 estimate: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.path, self.limit, self.estimate = path, limit, estimate


class FingerprintMismatchError(NpuDumpError, RuntimeError):
    """A golden run does not start from the NPU run's state or does not read its batch.

    ``target`` is the NPU bundle's path; ``differences`` the comparison
    (``{"state": {...}, "batch": {...}, "causes": [...]}``, see :mod:`npu_dump_hook.fingerprints`).
    """

    def __init__(self, message: str, target: Any = None, differences: Any = None) -> None:
        super().__init__(message)
        self.target = None if target is None else str(target)
        self.differences = differences or {}


class ReplayError(NpuDumpError, RuntimeError):
    """A golden run cannot feed the NPU bundle's kept input values into its graph.

    ``target`` is the NPU bundle's path; ``tensors`` lists ``{"name", "reason"}`` of each tensor
    that cannot be fed (not in this graph, not feedable, another dtype or shape).
    """

    def __init__(self, message: str, target: Any = None, tensors: Any = ()) -> None:
        super().__init__(message)
        self.target = None if target is None else str(target)
        self.tensors = [dict(t) for t in tensors]


class CompareError(NpuDumpError, RuntimeError):
    """``compare`` could not load or match its inputs (NPU side, golden side, graph); ``path``
    names the file or folder given."""

    def __init__(self, message: str, path: Any = None) -> None:
        super().__init__(message)
        self.path = None if path is None else str(path)


class TwoPhaseError(NpuDumpError, RuntimeError):
    """A pass of ``run --two-phase`` failed (its run exited non-zero or wrote no bundle); the message
    names the pass, its status and the command that repeats it."""

    def __init__(self, message: str, phase: str = "") -> None:
        super().__init__(message)
        self.phase = phase


class LocateError(NpuDumpError, FileNotFoundError):
    """This run's graph file or dump folder was not found; the message says what was searched where.

    ``what`` names the side that failed: ``"graph"`` (no or no single Build graph),
    ``"graph_keyword"`` (the keyword matched no graph) or ``"dump"`` (no dump step folder).
    """

    def __init__(self, message: str, searched: Any = (), what: str = "graph") -> None:
        super().__init__(message)
        self.searched = list(searched)
        self.what = what


class AmbiguousGraphError(LocateError):
    """Several Build graphs qualify as the training graph; ``searched`` lists the candidates."""


class BundleError(NpuDumpError, RuntimeError):
    """A bundle could not be written, read or verified."""

    def __init__(self, message: str, path: Any = None) -> None:
        super().__init__(message)
        self.path = None if path is None else str(path)


class BundleExistsError(BundleError, FileExistsError):
    """The bundle destination exists and is not empty (pass force=True / --force)."""


class UnsafePathError(BundleError, ValueError):
    """Input that could reach outside what it describes or cost out of proportion: a path that would
    escape its root (archive member, link, device, '..' in a name) or an archive that expands
    beyond its bound (docs/bundle-format.md rule 7)."""
