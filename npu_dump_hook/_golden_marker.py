"""The begin marker of a golden capture folder (``golden/``), as the emulator writes one per step folder.

:func:`begin_golden` writes :data:`~npu_dump_hook.constants.INCOMPLETE_STEP_MARKER` into the
folder before its first ``.npy`` file; ``golden_report`` (:mod:`npu_dump_hook.train.golden_capture`)
removes it once ``golden_manifest.json`` is in place. A capture killed while writing (SIGKILL: no
handler runs, so the folder is never renamed ``golden.incomplete``) leaves it, and compare and
collect refuse the folder with :func:`golden_incomplete`'s words.
"""
import os
import socket
from typing import Optional

from ._files import open_regular
from .constants import INCOMPLETE_STEP_MARKER

__all__ = ["begin_golden", "golden_incomplete"]


def begin_golden(golden_dir: str) -> None:
    """The begin marker (:data:`~npu_dump_hook.constants.INCOMPLETE_STEP_MARKER`) in
    ``golden_dir``, written before its first ``.npy`` file and removed by :func:`golden_report`
    once the manifest is in place: a capture killed while writing (SIGKILL: no handler runs, the
    folder is never renamed ``golden.incomplete``) leaves it, and compare and collect refuse the
    folder (:func:`golden_incomplete`)."""
    os.makedirs(golden_dir, exist_ok=True)
    text = "golden capture began (pid {} on {}) and never completed: the process was interrupted or killed " \
           "while writing it\n".format(os.getpid(), socket.gethostname())
    with open(os.path.join(golden_dir, INCOMPLETE_STEP_MARKER), "w") as handle:
        handle.write(text)


def golden_incomplete(golden_dir: str) -> Optional[str]:
    """Why ``golden_dir`` is an incomplete golden capture (its begin marker's text), or None."""
    marker = os.path.join(golden_dir, INCOMPLETE_STEP_MARKER)
    if not os.path.lexists(marker):
        return None
    try:
        with open_regular(marker) as handle:
            text = handle.read(4096).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return "golden folder {} is incomplete (killed): {}".format(
        golden_dir, text or "its begin marker {} is there".format(INCOMPLETE_STEP_MARKER))
