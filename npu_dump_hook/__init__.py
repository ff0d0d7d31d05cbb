"""npu_dump_hook: one hook, one config wrapper or one command to prepare Ascend NPU
dump data and GE graph files for accuracy comparison.

Importing this package never imports TensorFlow: names that need it
(``NpuDumpHook``, ``NpuDumpSession``, ``session_config``, ``estimator_config``) are loaded on
first use.
"""
import importlib
from typing import Any

from ._version import __version__
from .errors import (
    AmbiguousGraphError,
    BackendError,
    BundleError,
    BundleExistsError,
    CompareError,
    DumpFileError,
    DumpSizeError,
    FingerprintMismatchError,
    FormatError,
    GraphFormatError,
    LocateError,
    NameFormatError,
    NpuDumpError,
    OptionError,
    RandomnessError,
    ReplayError,
    StatsFormatError,
    UnsafePathError,
)
from .options import DumpOptions

# public name -> module that defines it; loaded on first use (the hook and config import
# TensorFlow; the backends pull in the formats and numpy, which a bare import need not).
_LAZY = {
    "NpuDumpHook": ".hook",
    "NpuDumpSession": ".session",
    "session_config": ".config",
    "estimator_config": ".config",
    "EmulatedNpu": ".emulator",
    "RealNpu": ".backends",
}

__all__ = [
    "__version__",
    "DumpOptions",
    "NpuDumpHook",
    "NpuDumpSession",
    "session_config",
    "estimator_config",
    "EmulatedNpu",
    "RealNpu",
    "NpuDumpError",
    "OptionError",
    "FormatError",
    "DumpFileError",
    "GraphFormatError",
    "NameFormatError",
    "StatsFormatError",
    "RandomnessError",
    "BackendError",
    "DumpSizeError",
    "FingerprintMismatchError",
    "ReplayError",
    "CompareError",
    "LocateError",
    "AmbiguousGraphError",
    "BundleError",
    "BundleExistsError",
    "UnsafePathError",
]


def __getattr__(name: str) -> Any:  # PEP 562, Python 3.7+
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError("module {!r} has no attribute {!r}".format(__name__, name))


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY))
