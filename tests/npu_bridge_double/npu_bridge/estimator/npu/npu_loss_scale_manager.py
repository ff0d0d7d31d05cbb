"""Double of ``npu_bridge.estimator.npu.npu_loss_scale_manager`` (reference §13).

A loss-scale manager holds the scale the loss is multiplied by (``get_loss_scale()``, a tensor)
and updates it from whether the step's gradients were finite (``update_loss_scale(finite)``, an
op). The adapter's classes extend TF 1.x contrib's managers, absent from TF 2.x; the double
implements the documented behaviour with plain variables (non-trainable, so they are state, not
model weights).
"""
import tensorflow as tf

v1 = tf.compat.v1


def _state(name, value, dtype=tf.float32):
    return v1.get_variable(name, initializer=tf.constant(value, dtype=dtype), trainable=False)


class FixedLossScaleManager(object):
    """A constant loss scale; ``update_loss_scale`` does nothing."""

    def __init__(self, loss_scale):
        if loss_scale < 1:
            raise ValueError("loss scale must be at least 1, got {}".format(loss_scale))
        self._loss_scale = tf.constant(float(loss_scale), dtype=tf.float32, name="loss_scale")

    def get_loss_scale(self):
        return self._loss_scale

    def update_loss_scale(self, finite_grads):
        del finite_grads
        return tf.no_op()


class ExponentialUpdateLossScaleManager(object):
    """The scale grows by ``incr_ratio`` after ``incr_every_n_steps`` finite steps in a row and
    shrinks by ``decr_ratio`` (never below 1) after ``decr_every_n_nan_or_inf`` overflowing ones."""

    def __init__(self, init_loss_scale, incr_every_n_steps, decr_every_n_nan_or_inf=2, incr_ratio=2,
                 decr_ratio=0.8):
        self._incr_every_n_steps = incr_every_n_steps
        self._decr_every_n_nan_or_inf = decr_every_n_nan_or_inf
        self._incr_ratio = float(incr_ratio)
        self._decr_ratio = float(decr_ratio)
        with v1.variable_scope("loss_scale_manager", reuse=v1.AUTO_REUSE):
            self._loss_scale = _state("loss_scale", float(init_loss_scale))
            self._good_steps = _state("good_steps", 0, tf.int32)
            self._bad_steps = _state("bad_steps", 0, tf.int32)

    def get_loss_scale(self):
        return self._loss_scale.read_value()

    def update_loss_scale(self, finite_grads):
        """The op that counts this step and rescales when a run of steps says so."""
        return tf.cond(finite_grads, self._after_finite, self._after_overflow)

    def _after_finite(self):
        good = self._good_steps + 1
        grow = good >= self._incr_every_n_steps
        return tf.group(
            v1.assign(self._bad_steps, 0),
            v1.assign(self._good_steps, tf.where(grow, 0, good)),
            v1.assign(self._loss_scale, tf.where(grow, self._loss_scale * self._incr_ratio, self._loss_scale)))

    def _after_overflow(self):
        bad = self._bad_steps + 1
        shrink = bad >= self._decr_every_n_nan_or_inf
        smaller = tf.maximum(self._loss_scale * self._decr_ratio, 1.0)
        return tf.group(
            v1.assign(self._good_steps, 0),
            v1.assign(self._bad_steps, tf.where(shrink, 0, bad)),
            v1.assign(self._loss_scale, tf.where(shrink, smaller, self._loss_scale)))
