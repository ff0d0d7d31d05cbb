"""Double of ``npu_bridge.estimator.npu.npu_optimizer`` (reference §13, "npu_bridge as scripts use it").

``NPUDistributedOptimizer`` and ``npu_distributed_optimizer_wrapper`` average gradients over the
ranks (HCCL all-reduce) when ``RANK_SIZE`` > 1. On one device (``RANK_SIZE`` unset or 1) they
change nothing: the gradients are the wrapped optimizer's and ``apply_gradients`` is its own.
With ``RANK_SIZE`` > 1 the collectives are the emulated HCCL's (ranks as processes, :mod:`npu_dump_hook.emulator.hccl`).
"""
import tensorflow as tf

from npu_bridge.hccl import hccl_ops


def allreduce(tensor, average=True):
    """``tensor`` summed over the ranks (divided by their number when ``average``)."""
    summed = hccl_ops.allreduce(tensor, "sum")
    return summed / tf.cast(hccl_ops.rank_size(), summed.dtype) if average else summed


def _averaged(grads_and_vars, scope):
    """Each gradient all-reduced (averaged) over the ranks; unchanged on one rank."""
    if hccl_ops.rank_size() <= 1:
        return grads_and_vars
    with tf.compat.v1.name_scope(scope):
        return [(None if grad is None else allreduce(grad), var) for grad, var in grads_and_vars]


class NPUDistributedOptimizer(tf.compat.v1.train.Optimizer):
    """``tf_optimizer`` with its gradients averaged over the ranks before they are applied."""

    def __init__(self, tf_optimizer, is_weight_update_sharding=False, name=None):
        self._optimizer = tf_optimizer
        self._is_weight_update_sharding = is_weight_update_sharding
        super(NPUDistributedOptimizer, self).__init__(
            use_locking=False, name=name or "Distributed" + type(tf_optimizer).__name__)

    def compute_gradients(self, *args, **kwargs):
        return _averaged(self._optimizer.compute_gradients(*args, **kwargs), self.get_name() + "_Allreduce")

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        return self._optimizer.apply_gradients(grads_and_vars, global_step, name)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


def npu_distributed_optimizer_wrapper(optimizer):
    """The same ``optimizer`` object; with ``RANK_SIZE`` > 1 its ``compute_gradients`` all-reduces."""
    if hccl_ops.rank_size() <= 1:
        return optimizer
    compute = optimizer.compute_gradients

    def compute_and_average(*args, **kwargs):
        return _averaged(compute(*args, **kwargs), "npu_distributed_optimizer_wrapper_Allreduce")

    optimizer.compute_gradients = compute_and_average
    return optimizer
