"""``python -m npu_dump_hook.runner [--] SCRIPT [ARGS...]``: :func:`npu_dump_hook.runner.main`.

The work happens in the package npu_dump_hook.runner, not in this ``__main__`` module: the
patches' state lives there, where the script's own imports find it.
"""
import sys

from npu_dump_hook.runner import main

if __name__ == "__main__":
    sys.exit(main())
