"""Double of ``npu_bridge.estimator.npu_ops`` (reference §7 ``npu_ops.dropout``, §13).

On Ascend ``dropout`` is ``DropOutGenMask``/``DropOutDoMask`` drawing from the device's generator;
those ops have no CPU kernel, so the double builds TensorFlow's own dropout (same contract: keep
each element with probability ``keep_prob``, scale kept ones by ``1/keep_prob``). It stays a random
op: the randomness audit finds its ``RandomUniform`` as a dropout pattern.
"""
import numbers

import tensorflow as tf


def dropout(x, keep_prob, noise_shape=None, seed=None, name=None):
    """``x`` with elements zeroed with probability ``1 - keep_prob``, the rest scaled by ``1/keep_prob``.

    A Python ``keep_prob`` of 1 returns ``x`` unchanged; outside (0, 1] it is a ValueError.
    """
    if isinstance(keep_prob, numbers.Real):
        if not 0 < keep_prob <= 1:
            raise ValueError("keep_prob must be a scalar tensor or a float in the range (0, 1], got {}".format(
                keep_prob))
        if keep_prob == 1:
            return x
    return tf.compat.v1.nn.dropout(x, noise_shape=noise_shape, seed=seed, name=name, rate=1 - keep_prob)
