"""The command line the before/after benchmarks share (``bench_bounded.py``, ``bench_emu_step.py``):
another checkout to compare with, alternating processes, repetitions inside each, the interpreter."""
import argparse
import sys


def before_after_parser(description: str, inner: int, inner_help: str) -> argparse.ArgumentParser:
    """``--before`` (required), ``--repeat``, ``--inner`` (default ``inner``) and ``--python``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--before", required=True, help="another checkout's root (its npu_dump_hook package)")
    parser.add_argument("--repeat", type=int, default=3, help="processes per tree, alternating")
    parser.add_argument("--inner", type=int, default=inner, help=inner_help)
    parser.add_argument("--python", default=sys.executable)
    return parser
