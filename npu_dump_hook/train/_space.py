"""Room on disk for the streamed capture, checked before TensorFlow's debug writer runs.

TensorFlow's tensor-dump kernel (``DebugIdentity`` with a ``file://`` URL, the streaming capture of
:mod:`.capture`) ``CHECK``-fails when a write fails: a full disk (ENOSPC) or a file-size limit
(``RLIMIT_FSIZE``, EFBIG once SIGXFSZ is ignored) aborts the whole training process with SIGABRT.
So before a step streams, :func:`check_room` compares what it will write with the free space of
the scratch folder's file system and with the process's file-size limit, and raises an
``OSError`` (ENOSPC or EFBIG) naming the folder instead; the hook's failure guard turns it into a
:class:`~npu_dump_hook.errors.BundleError` (``strict``) or a logged failure, and the step runs
uncaptured. Estimate: the static size of every streamed tensor, plus :data:`PER_FILE` bytes of
file-system and proto overhead each, plus :data:`HEADROOM`. A tensor of unknown static size (a
batch dimension left ``None``) counts at its lower bound -- its known dimensions times its item
size, each unknown dimension as 1 (:func:`~._capture_plan.floor_nbytes`) -- so the estimate never
exceeds what the step writes; when it does not fit, the message says how many sizes were unknown
and that more room may be needed. When it fits with unknown sizes, the step may still need more
than the estimate: the debug writer can then still fail on a disk filled to the last bytes.

Test-only: ``NPU_DUMP_HOOK_TEST_FREE_BYTES`` (an integer) stands for the free space figure.
"""
import errno
import os
from typing import Optional, Sequence

__all__ = ["check_room", "free_bytes", "file_size_limit", "TEST_FREE_ENV", "HEADROOM", "PER_FILE"]

TEST_FREE_ENV = "NPU_DUMP_HOOK_TEST_FREE_BYTES"
HEADROOM = 16 << 20
PER_FILE = 4096


def free_bytes(path: str) -> int:
    """Bytes an unprivileged process may still write on the file system of ``path`` (its
    nearest existing folder), or the test-only figure."""
    figure = os.environ.get(TEST_FREE_ENV)
    if figure is not None and figure.strip().isdigit():
        return int(figure)
    folder = os.path.abspath(path)
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    stat = os.statvfs(folder)
    return stat.f_bavail * stat.f_frsize


def file_size_limit() -> Optional[int]:
    """The soft ``RLIMIT_FSIZE`` of this process in bytes, None when unlimited (or unknown)."""
    try:
        import resource
    except ImportError:  # not a Unix
        return None
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY or soft < 0 else int(soft)


def check_room(path: str, sizes: Sequence[Optional[int]], floors: Sequence[int] = ()) -> None:
    """OSError naming ``path`` when the files of ``sizes`` (one per streamed tensor, None when
    unknown) would not fit the free space or the file-size limit (module doc); ``floors``: per
    tensor, the lower bound counted where its size is None (0 when not given)."""
    if not sizes:
        return
    floors = list(floors) + [0] * (len(sizes) - len(floors))
    estimate = [size if size is not None else floor for size, floor in zip(sizes, floors)]
    unknown = _unknown_note(sum(1 for size in sizes if size is None), len(sizes))
    limit = file_size_limit()
    if limit is not None and max(estimate) + PER_FILE > limit:
        raise OSError(errno.EFBIG, "a streamed tensor of {}{} bytes would exceed this process's file-size limit "
                      "(RLIMIT_FSIZE {} bytes), and TensorFlow's debug writer aborts the process on a failed "
                      "write; capture not started{}".format("at least " if unknown else "", max(estimate), limit,
                                                            unknown), path)
    needed = sum(estimate) + PER_FILE * len(estimate) + HEADROOM
    free = free_bytes(path)
    if needed > free:
        raise OSError(errno.ENOSPC, "not enough free space for the streamed capture: {} {} bytes needed, {} "
                      "free, and TensorFlow's debug writer aborts the process on a full disk; capture not "
                      "started{}".format("at least" if unknown else "about", needed, free, unknown), path)


def _unknown_note(unknown: int, total: int) -> str:
    """What the messages say when some sizes were unknown before the step ran."""
    if not unknown:
        return ""
    return ("; {} of {} tensor size(s) were unknown before the step (no static shape) and are counted at "
            "their lower bound, each unknown dimension as 1: the step may need more".format(unknown, total))
