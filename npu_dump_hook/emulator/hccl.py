"""Emulated HCCL: collectives between ranks that are processes on this machine.

A multi-rank emulated run is ``RANK_SIZE`` processes of one script, each with its ``RANK_ID``
(as Ascend launch scripts set them), sharing a rendezvous folder
(``$NPU_DUMP_HOOK_HCCL_DIR``; default ``{tempdir}/npu_dump_hook_hccl_{JOB_ID}``). The graph
functions build what ``npu_bridge.hccl.hccl_ops`` builds on a device, named as it names them::

    from npu_dump_hook.emulator import hccl
    summed = hccl.allreduce(grad, "sum")            # op {scope}/HcomAllReduce    (GE type HcomAllReduce)
    gathered = hccl.allgather(loss, rank_size)      # op {scope}/HcomAllGather    (GE type HcomAllGather)
    values = hccl.broadcast([w1, w2], root_rank=0)  # ops {scope}/HcomBroadcast   (GE type HcomBroadcast)

Each is a stateful ``py_func`` (TF type ``PyFunc``) whose name's last part is GE's type, so the
emulated NPU writes it into the Build graph and the dump as GE does (:func:`ge_collective_type`).
At run time a rank writes its input to ``{dir}/{op}/{n}/rank_{r}.npy`` (``n``: how often this
process ran the op), waits for every rank's file (``$NPU_DUMP_HOOK_HCCL_TIMEOUT`` seconds, default
300; then the step fails naming the missing ranks) and computes the result from all of them in
rank order, so every rank gets the same bits (HCCL's deterministic mode). Each rank marks its read
(``done_{r}``); the rank that sees every mark removes the round's folder, so a finished job leaves
no rounds behind. A job that failed may: a rank that finds its own file of a round already there
refuses it (an earlier job's data), so give each job its own folder (the default includes JOB_ID).

**Clock.** Each round completes at one time for all ranks: the newest modification time of its
files. :func:`agreed_step_time` gives the earliest completion since the last call, the same on every
rank, and the emulator stamps a dumped step's files from it (timestamp = that time + execution
order), so dump timestamps of different ranks are on one clock and a rank's op that ran before a
collective is earlier than every rank's op after it, as on the devices of one node.

**Order.** A collective blocks its TF thread until every rank has arrived, and TF runs independent
ops in any order on a small thread pool: two ranks that start different collectives first can wait
for each other for ever. As HCCL orders a stream's collectives, each op made here runs after the
previous one of the same type made in the same name scope (a control dependency), so all ranks run
them in creation order (collectives of one type and scope run in the same ``session.run``: the
gradients' AllReduces of one optimizer, the Broadcasts of one variable list).

Without ``RANK_SIZE`` > 1 there is nothing to exchange: the ops return their input (AllGather of one
rank, Broadcast from oneself), as on one device.
"""
import os
import re
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..constants import ENV_HCCL_DIR, ENV_HCCL_TIMEOUT, ENV_JOB_ID, ENV_RANK_ID, ENV_RANK_SIZE, HCCL_COLLECTIVE_TYPES
from ..errors import BackendError, OptionError

__all__ = ["allreduce", "allgather", "broadcast", "ge_collective_type", "COLLECTIVE_TYPES", "REDUCTIONS",
           "Rendezvous", "rendezvous", "agreed_step_time", "rank_size", "DEFAULT_TIMEOUT"]

#: GE's op types of the collectives whose output is the same on every rank.
COLLECTIVE_TYPES = HCCL_COLLECTIVE_TYPES
REDUCTIONS = ("sum", "prod", "max", "min")
DEFAULT_TIMEOUT = 300.0
_NAME = re.compile(r"(?:^|/)(Hcom(?:AllReduce|AllGather|Broadcast))(?:_\d+)?$")
_PY_FUNC_TYPES = ("PyFunc", "PyFuncStateless", "EagerPyFunc")
_lock = threading.Lock()
_process = {}  # type: Dict[str, Any]


def ge_collective_type(op_name: str, tf_type: str) -> Optional[str]:
    """GE's type of an emulated collective (a ``py_func`` named ``.../HcomAllReduce[_N]``), else None."""
    if tf_type not in _PY_FUNC_TYPES:
        return None
    found = _NAME.search(op_name)
    return found.group(1) if found else None


def rank_size(environ: Optional[Dict[str, str]] = None) -> int:
    """``RANK_SIZE`` (1 when unset); OptionError for anything but a positive integer."""
    text = ((os.environ if environ is None else environ).get(ENV_RANK_SIZE) or "1").strip()
    if not text.isdigit() or int(text) < 1:
        raise OptionError(ENV_RANK_SIZE, text, "must be a positive integer")
    return int(text)


class Rendezvous(object):
    """The file exchange of one rank (module doc)."""

    def __init__(self, folder: str, rank: int, size: int, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not 0 <= rank < size:
            raise OptionError(ENV_RANK_ID, rank, "must be in 0..RANK_SIZE-1 ({})".format(size - 1))
        self.folder, self.rank, self.size, self.timeout = folder, rank, size, timeout
        self._rounds = {}  # type: Dict[str, int]
        self._completed = []  # type: List[int]
        os.makedirs(folder, exist_ok=True)

    def exchange(self, key: str, array: np.ndarray) -> List[np.ndarray]:
        """Every rank's ``array`` for this round of ``key``, in rank order."""
        with _lock:
            count = self._rounds.get(key, 0)
            self._rounds[key] = count + 1
        here = os.path.join(self.folder, key.replace("/", "__"), str(count))
        os.makedirs(here, exist_ok=True)
        mine = os.path.join(here, "rank_{}.npy".format(self.rank))
        if os.path.exists(mine):
            raise BackendError("emulated HCCL {}: {} already exists: the rendezvous folder {} holds an earlier job's "
                               "round (give each job its own {})".format(key, mine, self.folder, ENV_HCCL_DIR))
        with open(mine + ".tmp", "wb") as handle:
            np.save(handle, np.asarray(array), allow_pickle=False)
        os.replace(mine + ".tmp", mine)
        paths = [os.path.join(here, "rank_{}.npy".format(r)) for r in range(self.size)]
        self._wait(paths, key)
        arrays = [np.load(p, allow_pickle=False) for p in paths]
        stamp = max(os.stat(p).st_mtime_ns for p in paths) // 1000
        with _lock:
            self._completed.append(int(stamp))
        self._done(here)
        return arrays

    def _done(self, here: str) -> None:
        """Mark this rank's read of the round; the rank that sees every mark removes the round."""
        with open(os.path.join(here, "done_{}".format(self.rank)), "wb"):
            pass
        if all(os.path.exists(os.path.join(here, "done_{}".format(r))) for r in range(self.size)):
            import shutil

            shutil.rmtree(here, ignore_errors=True)

    def _wait(self, paths: Sequence[str], key: str) -> None:
        deadline = time.monotonic() + self.timeout
        pause = 0.001
        while True:
            missing = [r for r, p in enumerate(paths) if not os.path.exists(p)]
            if not missing:
                return
            if time.monotonic() >= deadline:
                raise BackendError("emulated HCCL {}: rank(s) {} did not arrive within {:.0f} s (rendezvous {}; "
                                   "every rank must run the same steps)".format(key, missing, self.timeout,
                                                                                self.folder))
            time.sleep(pause)
            pause = min(pause * 2, 0.02)

    def take_completed(self) -> List[int]:
        """Completion times (µs) of the rounds since the last call."""
        with _lock:
            found, self._completed = self._completed, []
        return found


def rendezvous() -> Optional[Rendezvous]:
    """This process's :class:`Rendezvous` for the current RANK_ID, RANK_SIZE and folder variables
    (one per such triple, so its round counts last as long as the process), or None on one rank."""
    size = rank_size()
    if size <= 1:
        return None
    rank_text = (os.environ.get(ENV_RANK_ID) or "").strip()
    if not rank_text.isdigit():
        raise OptionError(ENV_RANK_ID, rank_text, "must be set to this rank's number when RANK_SIZE > 1")
    folder = os.environ.get(ENV_HCCL_DIR) or os.path.join(
        tempfile.gettempdir(), "npu_dump_hook_hccl_{}".format(os.environ.get(ENV_JOB_ID) or "job"))
    key = (os.path.abspath(folder), int(rank_text), size)
    with _lock:
        found = _process.get(key)
    if found is not None:
        return found
    timeout_text = os.environ.get(ENV_HCCL_TIMEOUT) or str(DEFAULT_TIMEOUT)
    try:
        timeout = float(timeout_text)
    except ValueError:
        raise OptionError(ENV_HCCL_TIMEOUT, timeout_text, "must be a number of seconds")
    made = Rendezvous(folder, int(rank_text), size, timeout)
    with _lock:
        return _process.setdefault(key, made)


def agreed_step_time(default_us: int) -> int:
    """The earliest collective completion since the last call (the same on every rank), or
    ``default_us`` when this process ran none (module doc, "Clock")."""
    with _lock:
        found = list(_process.values())
    times = [t for peer in found for t in peer.take_completed()]
    return min(times) if times else default_us


def _reduce(arrays: Sequence[np.ndarray], reduction: str) -> np.ndarray:
    result = np.array(arrays[0], copy=True)
    combine = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[reduction]
    for array in arrays[1:]:
        result = combine(result, array)
    return result.astype(arrays[0].dtype, copy=False)


def _collective(tensor: Any, name: str, compute: Any, same_shape: bool = True) -> Any:
    """A stateful py_func named ``name`` running ``compute(key, array)`` with its own op name as key."""
    from .. import _tf

    tf = _tf.tf_v1()
    tensor = tf.convert_to_tensor(tensor)
    holder = {}  # type: Dict[str, str]

    def run(array: np.ndarray) -> np.ndarray:
        return np.asarray(compute(holder["key"], array), dtype=array.dtype)

    graph = tensor.graph
    chain = "npu_dump_hook/hccl_chain/{}/{}".format(name, graph.get_name_scope())
    previous = graph.get_collection(chain)
    with graph.control_dependencies(previous[-1:]):
        result = tf.py_func(run, [tensor], tensor.dtype.base_dtype, stateful=True, name=name)
    graph.add_to_collection(chain, result.op)
    holder["key"] = result.op.name
    if same_shape:
        result.set_shape(tensor.shape)
    return result


def allreduce(tensor: Any, reduction: str = "sum") -> Any:
    """``tensor`` combined over the ranks (``sum``, ``prod``, ``max``, ``min``), op ``HcomAllReduce``."""
    if reduction not in REDUCTIONS:
        raise OptionError("reduction", reduction, "must be one of " + "|".join(REDUCTIONS))

    def compute(key: str, array: np.ndarray) -> np.ndarray:
        peer = rendezvous()
        return array if peer is None else _reduce(peer.exchange(key, array), reduction)

    return _collective(tensor, "HcomAllReduce", compute)


def allgather(tensor: Any, size: Optional[int] = None) -> Any:
    """Every rank's ``tensor`` concatenated on axis 0 (rank order), op ``HcomAllGather``."""

    def compute(key: str, array: np.ndarray) -> np.ndarray:
        peer = rendezvous()
        return array if peer is None else np.concatenate(peer.exchange(key, array), axis=0)

    return _collective(tensor, "HcomAllGather", compute, same_shape=False)


def broadcast(tensors: Sequence[Any], root_rank: int = 0) -> List[Any]:
    """``root_rank``'s value of each tensor on every rank, one op ``HcomBroadcast`` per tensor."""

    def compute(key: str, array: np.ndarray) -> np.ndarray:
        peer = rendezvous()
        return array if peer is None else peer.exchange(key, array)[int(root_rank)]

    return [_collective(tensor, "HcomBroadcast", compute) for tensor in tensors]
