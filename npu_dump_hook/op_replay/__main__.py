"""``python -m npu_dump_hook.op_replay REQUEST_DIR``: replay the request in that folder (see run.py)."""
import sys

from .run import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
