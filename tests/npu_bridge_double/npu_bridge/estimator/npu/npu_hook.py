"""Double of ``npu_bridge.estimator.npu.npu_hook`` (reference §2 step 6, §13 ``npu_hooks_append``).

``NPUBroadcastGlobalVariablesHook(root_rank, index)`` broadcasts the global variables from
``root_rank`` to every rank once the session exists, so all cards start from the same weights.
With one rank there is nothing to send: the hook does nothing. With ``RANK_SIZE`` > 1 the
broadcast is the emulated HCCL's (ranks as processes, :mod:`npu_dump_hook.emulator.hccl`).
"""
import tensorflow as tf

from npu_bridge.hccl import hccl_ops


class NPUBroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """Global variables of ``root_rank`` copied to every rank after the session is created."""

    def __init__(self, root_rank=None, index=None):
        self._root_rank = root_rank
        self._index = index
        self._broadcast = None

    def begin(self):
        if hccl_ops.rank_size() > 1:
            variables = tf.compat.v1.global_variables()
            received = hccl_ops.broadcast(variables, self._root_rank)
            self._broadcast = tf.group(*[tf.compat.v1.assign(v, r) for v, r in zip(variables, received)])

    def after_create_session(self, session, coord):
        if self._broadcast is not None:
            session.run(self._broadcast)
