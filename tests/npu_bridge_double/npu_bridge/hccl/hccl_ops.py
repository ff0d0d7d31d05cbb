"""Double of ``npu_bridge.hccl.hccl_ops`` (reference §13): collectives over one device only.

With one rank (``RANK_SIZE`` unset or 1) a collective of one participant returns its input:
``allreduce``/``allgather``/``broadcast`` are identities. The double has no HCCL, so with
``RANK_SIZE`` > 1 each raises :class:`NotImplementedError` instead of computing a wrong answer.
"""
import os

import tensorflow as tf


def rank_size():
    """``RANK_SIZE`` as an int (1 when unset)."""
    return int(os.environ.get("RANK_SIZE") or 1)


def _one_rank(collective):
    if rank_size() > 1:
        raise NotImplementedError("npu_bridge double: hccl_ops.{} with RANK_SIZE={} needs HCCL; the double "
                                  "emulates one device only".format(collective, rank_size()))


def allreduce(tensor, reduction, fusion=1, fusion_id=-1, group="hccl_world_group"):
    """Sum/prod/max/min of ``tensor`` over the ranks: the tensor itself on one rank."""
    _one_rank("allreduce")
    if reduction not in ("sum", "prod", "max", "min"):
        raise ValueError("reduction must be one of sum|prod|max|min, got {!r}".format(reduction))
    return tf.identity(tensor, name="HcomAllReduce")


def allgather(tensor, rank_size, group="hccl_world_group"):
    """``tensor`` of every rank concatenated on axis 0: the tensor itself on one rank."""
    _one_rank("allgather")
    return tf.identity(tensor, name="HcomAllGather")


def broadcast(tensor, root_rank, fusion=2, fusion_id=0, group="hccl_world_group"):
    """The root rank's tensors (a list) on every rank: the inputs themselves on one rank."""
    _one_rank("broadcast")
    return [tf.identity(t, name="HcomBroadcast") for t in tensor]
