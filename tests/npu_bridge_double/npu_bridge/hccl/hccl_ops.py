"""Double of ``npu_bridge.hccl.hccl_ops`` (reference §13): collectives as the emulated NPU runs them.

With one rank (``RANK_SIZE`` unset or 1) a collective of one participant returns its input:
``allreduce``/``allgather``/``broadcast`` are identities. With ``RANK_SIZE`` > 1 the ranks are
processes on this machine and the collectives are the emulated HCCL's
(:mod:`npu_dump_hook.emulator.hccl`: ops named ``HcomAllReduce``/``HcomAllGather``/``HcomBroadcast``
as npu_bridge names them, values exchanged through ``$NPU_DUMP_HOOK_HCCL_DIR``), so a multi-rank
script runs its collectives and the emulated NPU dumps them.
"""
import os

import tensorflow as tf


def rank_size():
    """``RANK_SIZE`` as an int (1 when unset)."""
    return int(os.environ.get("RANK_SIZE") or 1)


def _emulated():
    from npu_dump_hook.emulator import hccl

    return hccl


def allreduce(tensor, reduction, fusion=1, fusion_id=-1, group="hccl_world_group"):
    """Sum/prod/max/min of ``tensor`` over the ranks: the tensor itself on one rank."""
    if reduction not in ("sum", "prod", "max", "min"):
        raise ValueError("reduction must be one of sum|prod|max|min, got {!r}".format(reduction))
    if rank_size() > 1:
        return _emulated().allreduce(tensor, reduction)
    return tf.identity(tensor, name="HcomAllReduce")


def allgather(tensor, rank_size, group="hccl_world_group"):
    """``tensor`` of every rank concatenated on axis 0: the tensor itself on one rank."""
    if globals()["rank_size"]() > 1:
        return _emulated().allgather(tensor, rank_size)
    return tf.identity(tensor, name="HcomAllGather")


def broadcast(tensor, root_rank, fusion=2, fusion_id=0, group="hccl_world_group"):
    """The root rank's tensors (a list) on every rank: the inputs themselves on one rank."""
    if rank_size() > 1:
        return _emulated().broadcast(tensor, root_rank)
    return [tf.identity(t, name="HcomBroadcast") for t in tensor]
