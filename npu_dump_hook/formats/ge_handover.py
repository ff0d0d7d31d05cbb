"""What the writer of a ge_proto text file knew of it, handed to its readers in the same process.

The emulated NPU writes its Build graph moments before the bundle writer, in the same process,
scans it for its ops and converts it to msaccucmp's JSON form (0.4-0.6 s for an unrolled 20-step
RNN's 2.5 MB graph), and the Build graph choice (``locate.graphs``) scans it again. The writer had
all at hand: :func:`note_graph` keeps the JSON text, the graph's name and the ops' (name, no task,
original op names, type), and :func:`handed_json` / :func:`handed_ops` / :func:`handed_graph` give
them back for a path that is still the very file noted, by the one matching rule of
:mod:`npu_dump_hook._written` (``still_noted``: same device, inode, size, mtime to the nanosecond
and name, a regular file). A changed, replaced or copied file answers None and is read as
before; so does a file of a real NPU, which nobody noted. Stdlib only.
"""
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

from .._bounded import BoundedStore
from .._written import file_identity, still_noted

__all__ = ["HandedOp", "note_graph", "handed_json", "handed_ops", "handed_graph", "forget_graphs"]

#: Graphs kept, the oldest forgotten first (the JSON of one is ~3x its text): a run writes one.
MAX_GRAPHS = 2
#: A longer JSON form is not kept (its memory would stay for the rest of the run): the file is
#: converted, the converter's memory bounded (ge_json). The 20-step RNN's is 7M characters.
MAX_JSON_CHARS = 1 << 25

#: (device, inode) -> (identity, JSON text, ops, graph name); the newest kept.
_noted = BoundedStore(MAX_GRAPHS)  # type: BoundedStore[Tuple[int, int], Tuple[Any, ...]]


class HandedOp(NamedTuple):
    """What the bundle's op scan (``bundle.describe.graph_ops``) reads of an op, as the scan's
    OpSummary gives it."""

    name: str
    no_task: bool
    original_op_names: Optional[Tuple[str, ...]]  # None: attr absent
    type: Optional[str] = None  # the op's type as the scan reads it ("" when absent); None: not known


def note_graph(path: str, json_text: Optional[str], ops: Optional[Sequence[HandedOp]],
               graph_name: Optional[str] = None) -> None:
    """Note, for the ge_proto text file just written at ``path``: ``json_text``, its msaccucmp
    JSON form as :func:`.ge_json.write_msaccucmp_json` writes it (final newline included),
    ``ops``, every op of the file in file order (None: not known) and ``graph_name``, the name of
    its only graph (None: not known); a JSON text over
    :data:`MAX_JSON_CHARS` is not kept. Never raises: a file whose identity cannot be taken is
    not noted (it is then read)."""
    identity = file_identity(path)
    if identity is None:
        return
    if json_text is not None and len(json_text) > MAX_JSON_CHARS:
        json_text = None
    _noted.put(identity[:2], (identity, json_text, None if ops is None else tuple(ops), graph_name))


def handed_json(path: str) -> Optional[str]:
    """The noted JSON form of the file at ``path`` if it is still the file noted, else None."""
    found = still_noted(_noted, None, path)
    return None if found is None else found[1]


def handed_ops(path: str) -> Optional[Tuple[HandedOp, ...]]:
    """The noted ops of the file at ``path`` if it is still the file noted, else None."""
    found = still_noted(_noted, None, path)
    return None if found is None else found[2]


def handed_graph(path: str) -> Optional[Tuple[str, Tuple[HandedOp, ...]]]:
    """(graph name, ops) of the file at ``path`` if it is still the file noted and both were noted,
    every op with its type (what the Build graph choice, ``locate.graphs``, reads of a file of
    one graph), else None."""
    found = still_noted(_noted, None, path)
    if found is None or found[2] is None or not found[3] or any(op.type is None for op in found[2]):
        return None
    return found[3], found[2]


def forget_graphs() -> None:
    """Drop every note (tests; a caller that wants every graph read)."""
    _noted.clear()
