"""Double of ``npu_bridge.estimator.npu.util`` (reference §4 ``util.set_iteration_per_loop``).

On Ascend one ``sess.run`` of the returned ``IterationOp`` runs ``iterations_per_loop`` training
iterations on the device; GE finds the loop count in the ``npu_runconfig/iterations_per_loop``
variable. The double creates the same variables with the same values and the same ``IterationOp``
group, but it has no device loop: one ``sess.run`` is one iteration on CPU.
"""
import tensorflow as tf

v1 = tf.compat.v1


def check_positive_integer(value, name):
    """TypeError unless ``value`` is an int, ValueError unless it is positive (as upstream)."""
    if not isinstance(value, int):
        raise TypeError("{} must be int, got {}".format(name, type(value)))
    if value <= 0:
        raise ValueError("{} must be positive, got {}".format(name, value))


def _loop_variable(name, value, collection):
    var = v1.get_variable(name, initializer=tf.constant(value, dtype=tf.int64), trainable=False,
                          collections=[collection, v1.GraphKeys.LOCAL_VARIABLES], use_resource=True)
    return var


def set_iteration_per_loop(sess, train_op, iterations_per_loop=1):
    """``train_op`` itself for 1; else its ``tf.group`` named ``IterationOp``, with the
    ``npu_runconfig/{iterations_per_loop,loop_cond,zero,one}`` variables loaded in ``sess``."""
    if not isinstance(train_op, tf.Operation):
        raise ValueError("train_op must be a tf.Operation, got {}".format(type(train_op)))
    check_positive_integer(iterations_per_loop, "iterations_per_loop")
    if iterations_per_loop == 1:
        return train_op
    collection = "npu_runconfig_" + train_op.name
    values = {"iterations_per_loop": iterations_per_loop - 1, "loop_cond": 0, "zero": 0, "one": 1}
    with v1.variable_scope("npu_runconfig", reuse=v1.AUTO_REUSE):
        variables = {name: _loop_variable(name, value, collection) for name, value in values.items()}
    sess.run([var.initializer for var in variables.values()])
    variables["iterations_per_loop"].load(iterations_per_loop - 1, sess)
    return tf.group(train_op, name="IterationOp")
