"""The suspects file: which ops the second, targeted dump of the large-model path dumps.

Written by ``npu-dump-hook compare --suspects-out FILE`` (built by
:func:`npu_dump_hook.compare.suspects.build_suspects` from the comparison), read by
``npu-dump-hook run --dump-layer-from FILE`` (the runner keyword ``dump_layer_from``), which sets
``dump_layer`` to :func:`dump_layer_of` the file. docs/compare.md, "Suspects", describes it::

    {"schema": "npu_dump_hook/suspects@1",
     "dump_layer": "conv2/Conv2D conv2/BiasAdd pool1/MaxPool",   # the dump_layer text, as is
     "ops": [{"name": "conv2/Conv2D", "rank": 1, "reasons": ["first_divergence"],
              "npu_op": "conv2/Conv2Dconv2/BiasAdd", "of": null}, ...],
     "limit": 5, "producer_depth": 1, "source": {...}, "first_divergence": {...} or null}

``ops[].name`` are original TF op names, exactly as ``dump_layer`` takes them (a fused node is
its original ops, an inserted Cast/TransData the op whose output it converts); ``dump_layer`` is
those names joined by spaces, in rank order.

Only the standard library: the runner reads the file before the script starts.
"""
import json
import os
from typing import Any, Dict, List

from ._atomic import atomic_write_bytes
from .errors import OptionError

__all__ = ["SUSPECTS_SCHEMA", "REASONS", "write_suspects", "read_suspects", "dump_layer_of"]

SUSPECTS_SCHEMA = "npu_dump_hook/suspects@1"
#: Why an op is a suspect, in the order the ranks follow.
REASONS = ("first_divergence", "root_cause", "nan_inf_origin", "overflow", "breached", "producer")
_MAX_BYTES = 16 << 20  # a suspects file names at most a few thousand ops


def write_suspects(path: str, doc: Dict[str, Any]) -> None:
    """Write ``doc`` to ``path`` atomically (a reader sees no half file); checked first."""
    _check(doc, path)
    atomic_write_bytes(path, (json.dumps(doc, indent=1, allow_nan=False) + "\n").encode("utf-8"))


def read_suspects(path: str, option: str = "dump_layer_from") -> Dict[str, Any]:
    """The suspects document in ``path``; OptionError naming ``option`` and the file otherwise."""
    try:
        if os.path.getsize(path) > _MAX_BYTES:
            raise OptionError(option, path, "larger than {} bytes: not a suspects file".format(_MAX_BYTES))
        with open(path, "rb") as handle:
            doc = json.loads(handle.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, OptionError):
            raise
        raise OptionError(option, path, "not a readable suspects file (JSON, written by compare --suspects-out): "
                                        "{}".format(exc)) from None
    _check(doc, path, option)
    return doc


def dump_layer_of(path: str, option: str = "dump_layer_from") -> str:
    """The ``dump_layer`` text of the suspects file ``path`` (space-separated op names)."""
    return read_suspects(path, option)["dump_layer"]


def _check(doc: Any, path: str, option: str = "suspects") -> None:
    def bad(rule: str) -> OptionError:
        return OptionError(option, path, rule)

    if not isinstance(doc, dict) or doc.get("schema") != SUSPECTS_SCHEMA:
        raise bad("schema must be {!r} (a file written by compare --suspects-out)".format(SUSPECTS_SCHEMA))
    ops = doc.get("ops")
    if not isinstance(ops, list) or not ops:
        raise bad("'ops' must be a non-empty list (a comparison without suspects writes no file)")
    names = []  # type: List[str]
    for number, op in enumerate(ops):
        name = op.get("name") if isinstance(op, dict) else None
        if not isinstance(name, str) or not name or name != name.strip() or any(c.isspace() for c in name):
            raise bad("ops[{}].name must be an op name without spaces".format(number))
        reasons = op.get("reasons")
        if not isinstance(reasons, list) or not reasons or any(r not in REASONS for r in reasons):
            raise bad("ops[{}].reasons must be a non-empty list of {}".format(number, "/".join(REASONS)))
        names.append(name)
    if len(set(names)) != len(names):
        raise bad("'ops' names an op twice")
    if doc.get("dump_layer") != " ".join(names):
        raise bad("'dump_layer' must be the ops' names joined by single spaces, in their order")
