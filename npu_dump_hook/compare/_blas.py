"""One BLAS thread while comparing: numpy's OpenBLAS splits every ``np.dot`` of more than a few
thousand elements over all cores, and the metrics take four dot products per tensor chunk.
On tensors of the size dumps have, the threads cost more than they give (measured on the
2-core benchmark VM: 70% more CPU per dot product, tens of thousands of context switches per
second), and with one worker process per core they only fight each other.

:func:`single_blas_thread` is a context manager that sets OpenBLAS's thread count to 1 and
restores it on exit (pool workers call :func:`limit_blas_threads` once and keep it). The
library is found among the shared objects this process has mapped (``/proc/self/maps``)
and called through ``ctypes`` (``openblas_set_num_threads`` and its ``64_`` / ``scipy_``
variants). Where there is no OpenBLAS (another BLAS, another OS) nothing happens.
"""
import contextlib
import ctypes
import logging
from typing import Any, Iterator, Optional, Tuple

__all__ = ["single_blas_thread", "limit_blas_threads"]

logger = logging.getLogger(__name__)

_PREFIXES = ("openblas", "scipy_openblas")
_SUFFIXES = ("64_", "")
_FOUND = []  # type: list  # [(get, set)] or [None] once looked up


def _openblas() -> Optional[Tuple[Any, Any]]:
    if _FOUND:
        return _FOUND[0]
    found = None
    try:
        with open("/proc/self/maps") as handle:
            paths = sorted({line.split()[-1] for line in handle if "openblas" in line.lower() and "/" in line})
    except OSError:
        paths = []
    for path in paths:
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in _PREFIXES:
            for suffix in _SUFFIXES:
                setter = getattr(library, "{}_set_num_threads{}".format(prefix, suffix), None)
                getter = getattr(library, "{}_get_num_threads{}".format(prefix, suffix), None)
                if setter is not None and getter is not None:
                    setter.argtypes, setter.restype = [ctypes.c_int], None
                    getter.argtypes, getter.restype = [], ctypes.c_int
                    found = (getter, setter)
                    break
            if found:
                break
        if found:
            break
    _FOUND.append(found)
    return found


def limit_blas_threads() -> Optional[int]:
    """Set OpenBLAS to one thread; the previous count, or None when there is no OpenBLAS."""
    calls = _openblas()
    if calls is None:
        return None
    getter, setter = calls
    previous = int(getter())
    if previous != 1:
        setter(1)
    return previous


@contextlib.contextmanager
def single_blas_thread() -> Iterator[None]:
    """One OpenBLAS thread inside the block, the previous count restored after it."""
    previous = limit_blas_threads()
    try:
        yield
    finally:
        if previous is not None and previous != 1:
            calls = _openblas()
            if calls is not None:
                calls[1](previous)
