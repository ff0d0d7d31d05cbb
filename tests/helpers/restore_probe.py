"""Run in a fresh process: restore an initial-state checkpoint into the MLP sample and print its loss.

usage: restore_probe.py CHECKPOINT_PREFIX
"""
import json
import sys

import tensorflow as tf

from npu_dump_hook.determinism import apply_policy
from npu_dump_hook.sample_models import mlp_session

v1 = tf.compat.v1


def main(prefix):
    with tf.Graph().as_default() as graph:
        model = mlp_session.build_graph()
        apply_policy(graph, "strip")  # the same data order and identity dropout as the captured step
        saver = v1.train.Saver(var_list=v1.global_variables())
        with v1.Session() as session:
            session.run([v1.global_variables_initializer(), v1.tables_initializer()])
            saver.restore(session, prefix)
            loss = session.run(model["loss"])
    print(json.dumps({"loss": float(loss)}))


if __name__ == "__main__":
    main(sys.argv[1])
