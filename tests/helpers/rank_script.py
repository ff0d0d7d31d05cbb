"""One rank of a data-parallel training job in the shape of an Ascend port, written by this project.

usage: rank_script.py npu OUTPUT_DIR [FAULTS_JSON]     (the NPU run of this rank, emulated backend)
       rank_script.py golden OUTPUT_DIR NPU_ROOT       (its golden run: rank_{RANK_ID} of NPU_ROOT)

Run once per rank with ``RANK_ID``/``RANK_SIZE`` set and one ``NPU_DUMP_HOOK_HCCL_DIR`` for the job
(the double's ``npu_bridge.hccl`` collectives are the emulated HCCL's then). The model is a small MLP;
each rank reads its own shard of the data (seeded by its rank), ``NPUDistributedOptimizer`` averages
the gradients (HcomAllReduce), the step gathers every rank's loss (HcomAllGather) and
``NPUBroadcastGlobalVariablesHook`` broadcasts rank 0's initial weights (HcomBroadcast, once, before
the first step). Bundles go to ``OUTPUT_DIR/bundles/rank_{RANK_ID}/...`` with a shared ``index.json``.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf
from npu_bridge.estimator.npu.npu_hook import NPUBroadcastGlobalVariablesHook
from npu_bridge.estimator.npu.npu_optimizer import NPUDistributedOptimizer
from npu_bridge.hccl import hccl_ops

from npu_dump_hook import NpuDumpHook

v1 = tf.compat.v1
v1.disable_eager_execution()
BATCH = 8


def build(rank, size):
    v1.set_random_seed(7)
    x = v1.placeholder(tf.float32, [BATCH, 6], name="x")
    y = v1.placeholder(tf.float32, [BATCH, 2], name="y")
    hidden = v1.layers.dense(x, 16, activation=tf.nn.relu, name="fc1")
    out = v1.layers.dense(hidden, 2, name="fc2")
    loss = tf.reduce_mean(tf.square(out - y), name="loss")
    gathered = hccl_ops.allgather(tf.reshape(loss, [1]), size)
    global_step = v1.train.get_or_create_global_step()
    optimizer = NPUDistributedOptimizer(v1.train.MomentumOptimizer(0.05, 0.9))
    train_op = optimizer.minimize(loss, global_step=global_step)
    rng = np.random.RandomState(100 + rank)
    feeds = []
    for _ in range(4):
        data = rng.rand(BATCH, 6).astype(np.float32)
        feeds.append({x: data, y: np.stack([data.sum(1), data[:, 0] - data[:, 1]], 1).astype(np.float32)})
    return train_op, gathered, feeds


def main(argv):
    mode, output_dir = argv[1], argv[2]
    rank, size = int(os.environ["RANK_ID"]), int(os.environ["RANK_SIZE"])
    if mode == "npu":
        faults = json.loads(argv[3]) if len(argv) > 3 else None
        hook = NpuDumpHook(output_dir=output_dir, backend="emulated", faults=faults or None)
    else:
        index = json.load(open(os.path.join(argv[3], "index.json")))
        hook = NpuDumpHook(output_dir=output_dir, initial_state=os.path.join(argv[3], index["ranks"][str(rank)]["path"]))
    graph = tf.Graph()
    with graph.as_default():
        train_op, gathered, feeds = build(rank, size)
        hooks = [hook, NPUBroadcastGlobalVariablesHook(0, rank)]
        with v1.train.MonitoredSession(session_creator=v1.train.ChiefSessionCreator(), hooks=hooks) as session:
            for feed in feeds:
                if session.should_stop():
                    break
                _, losses = session.run([train_op, gathered], feed_dict=feed)
                print("rank {} losses {}".format(rank, list(losses)))
    print(hook.bundle.location)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
