"""An unmodified training script (no npu_dump_hook in it) that checkpoints into its own folder.

usage: checkpointing_script.py KIND FOLDER [STEPS]
KIND picks how it trains STEPS steps (default 100) and saves into FOLDER, resuming from its
latest checkpoint:

    monitored   MonitoredTrainingSession(checkpoint_dir=FOLDER), a checkpoint every step
    saver_hook  MonitoredSession whose ChiefSessionCreator restores FOLDER, with its own
                CheckpointSaverHook(FOLDER) every step; its Saver keeps 1 checkpoint (so a save
                elsewhere would delete the one it restored, were it remembered)
    saver       a tf.compat.v1.Session whose loop calls Saver.save(sess, FOLDER/model.ckpt,
                global_step) after every step; prints "saved PREFIX" for each

Prints "global step N" after training: the global step after its last step (under the runner:
after the dumped step).
"""
import os
import sys

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
v1.disable_eager_execution()


def model():
    x_all = np.random.RandomState(0).rand(64, 4).astype(np.float32)
    y_all = x_all.sum(axis=1, keepdims=True)
    dataset = tf.data.Dataset.from_tensor_slices((x_all, y_all)).repeat().batch(16)
    x, y = v1.data.make_one_shot_iterator(dataset).get_next()
    loss = v1.losses.mean_squared_error(y, v1.layers.dense(v1.layers.dense(x, 8, activation=tf.nn.tanh), 1))
    train_op = v1.train.MomentumOptimizer(0.05, 0.9).minimize(loss, global_step=v1.train.get_or_create_global_step())
    with tf.control_dependencies([train_op]):  # read after the step's update, on TF 1.15 and 2.x alike
        step = tf.identity(v1.train.get_global_step())
    return train_op, step


def monitored(folder, steps):
    train_op, step = model()
    stop = v1.train.StopAtStepHook(num_steps=steps)
    with v1.train.MonitoredTrainingSession(checkpoint_dir=folder, save_checkpoint_steps=1, hooks=[stop]) as sess:
        while not sess.should_stop():
            last = sess.run([train_op, step])[1]
    return last


def saver_hook(folder, steps):
    train_op, step = model()
    scaffold = v1.train.Scaffold(saver=v1.train.Saver(max_to_keep=1))
    hooks = [v1.train.StopAtStepHook(num_steps=steps),
             v1.train.CheckpointSaverHook(folder, save_steps=1, scaffold=scaffold)]
    creator = v1.train.ChiefSessionCreator(scaffold=scaffold, checkpoint_dir=folder)
    with v1.train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
        while not sess.should_stop():
            last = sess.run([train_op, step])[1]
    return last


def saver(folder, steps):
    train_op, step = model()
    saver = v1.train.Saver(max_to_keep=2)
    os.makedirs(folder, exist_ok=True)
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        latest = v1.train.latest_checkpoint(folder)
        if latest:
            saver.restore(sess, latest)
        for _ in range(steps):
            _, last = sess.run([train_op, step])
            print("saved", saver.save(sess, os.path.join(folder, "model.ckpt"), global_step=last))
    return last


if __name__ == "__main__":
    kind, folder = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    print("global step", {"monitored": monitored, "saver_hook": saver_hook, "saver": saver}[kind](folder, steps))
