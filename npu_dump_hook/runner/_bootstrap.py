"""The child's argv (:func:`bootstrap_command`), apart from the child's code.

``npu-dump-hook run``'s own process imports this module, not :mod:`._child`: it only launches
the child and waits, so it does not import the patches (:mod:`._inject` and what it needs).
"""
import os
from typing import List, Sequence

__all__ = ["bootstrap_command"]


def bootstrap_command(python: str, python_options: Sequence[str], target: Sequence[str]) -> List[str]:
    """The argv that runs ``target`` (``["--", script, args...]`` or ``["-m", module, args...]``)
    under ``python`` with this copy of the package injected, whether or not that interpreter has
    it installed; the package's folder is taken off ``sys.path`` again before the script starts."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = ("import sys; sys.path.insert(0, {0!r}); import npu_dump_hook.runner as runner; "
            "sys.path.remove({0!r}); sys.exit(runner.main())").format(root)
    return [python] + list(python_options) + ["-c", code] + list(target)
