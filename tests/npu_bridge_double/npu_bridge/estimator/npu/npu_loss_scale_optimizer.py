"""Double of ``npu_bridge.estimator.npu.npu_loss_scale_optimizer`` (reference §13).

``NPULossScaleOptimizer(opt, loss_scale_manager, is_distributed=False)`` multiplies the loss by
the manager's scale before differentiating, divides the gradients by it, applies them only when
all are finite (on Ascend the device's float-status registers say so; here ``tf.math.is_finite``)
and lets the manager update the scale. In float32 on CPU the gradients stay finite, so a step
updates the variables as the wrapped optimizer would, up to the rounding of the scaling.
"""
import tensorflow as tf

from npu_bridge.estimator.npu.npu_optimizer import _averaged

v1 = tf.compat.v1


class NPULossScaleOptimizer(v1.train.Optimizer):
    """``opt`` with loss scaling from ``loss_scale_manager`` (updates skipped on overflow)."""

    def __init__(self, opt, loss_scale_manager, is_distributed=False):
        self._opt = opt
        self._loss_scale_manager = loss_scale_manager
        self._is_distributed = is_distributed
        super(NPULossScaleOptimizer, self).__init__(use_locking=False, name="NPULossScaleOptimizer")

    def compute_gradients(self, loss, var_list=None, **kwargs):
        scale = self._loss_scale_manager.get_loss_scale()
        loss_value = loss() if callable(loss) else loss
        scaled = loss_value * tf.cast(scale, loss_value.dtype.base_dtype)
        grads_and_vars = self._opt.compute_gradients(scaled, var_list=var_list, **kwargs)
        if self._is_distributed:
            grads_and_vars = _averaged(grads_and_vars, self.get_name() + "_Allreduce")
        return [(None if grad is None else grad * tf.cast(tf.math.reciprocal(scale), grad.dtype.base_dtype), var)
                for grad, var in grads_and_vars]

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = list(grads_and_vars)
        checks = [tf.reduce_all(tf.math.is_finite(grad)) for grad, _ in grads_and_vars if grad is not None]
        finite = tf.reduce_all(tf.stack(checks)) if checks else tf.constant(True)
        update = tf.cond(finite, lambda: tf.group(self._opt.apply_gradients(grads_and_vars, global_step, name)),
                         tf.no_op)
        return tf.group(update, self._loss_scale_manager.update_loss_scale(finite))

    def get_slot(self, *args, **kwargs):
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._opt.variables(*args, **kwargs)
