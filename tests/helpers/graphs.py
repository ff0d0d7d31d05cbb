"""Small training graphs shared by tests."""
import tensorflow as tf

v1 = tf.compat.v1


def run_long_named_graph(hook, long_scope):
    """One step of a graph whose op names exceed 255 bytes; returns the product op's name."""
    with tf.Graph().as_default():
        with tf.name_scope(long_scope):
            value = v1.get_variable("v", initializer=tf.constant([1.0, 2.0]))
            product = tf.multiply(value, 3.0, name="product")
        step = v1.train.get_or_create_global_step()
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(product), global_step=step)
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            while not session.should_stop():
                session.run([train_op, product])  # fetched, or TF prunes it: the gradient does not need it
    return product.op.name
