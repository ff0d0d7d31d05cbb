"""Keras ``fit`` in graph mode with a ``Dropout`` layer, through ``npu-dump-hook run``, both stacks.

Found by hand (issue #21, shape "Keras Sequential fit"): Keras checks its variables
(``VarIsInitializedOp``) before it runs their initializer, and that first run sends the session
every op of the graph; TensorFlow then ignores edits of those ops ("This mutation will have no
effect"). The runner used to wrap the session only at the initializer run, so the randomness
policy's strip of the dropout (and the emulated numerics) had no effect: the NPU and golden runs
drew different dropout masks and ``compare`` named the dropout as the first divergence of a
healthy run. The session is now wrapped at the initialization check.
"""
import os
import sys

import tensorflow as tf

from npu_dump_hook.bundle import read_bundle, verify_bundle

from helpers.runs import clean_env, run

CLI = [sys.executable, "-m", "npu_dump_hook"]
TF2 = tf.__version__.startswith("2")

SCRIPT = '''
import numpy as np
import tensorflow as tf

if tf.__version__.startswith("2"):
    tf.compat.v1.disable_eager_execution()
# Fixed data and batch order (the dropout is what this test is about): with random ones, a batch
# whose only positive logit is tiny turns the emulated float16 MatMul's ~1e-4 error into a ~1.5%
# magnitude error of the loss's Select (its other rows are zeros), and compare named that Select in
# a healthy run (once in CI, 2026-12-04): a limit of compare's magnitude metric, not of the strip.
x = np.random.RandomState(7).rand(64, 10).astype("float32")
y = (x.sum(axis=1) > 5).astype("float32")
model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation="relu", input_shape=(10,)),
                             tf.keras.layers.Dropout(0.5),
                             tf.keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer="adam", loss="binary_crossentropy")
model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False, validation_data=(x[:16], y[:16]))
print("script ended")
'''


def _bundle(folder, name, flags):
    cwd = os.path.join(str(folder), name)
    os.makedirs(cwd)
    script = os.path.join(str(folder), "keras_dropout.py")
    if not os.path.exists(script):
        with open(script, "w") as handle:
            handle.write(SCRIPT)
    argv = CLI + ["run", "--output-dir", os.path.join(cwd, "out")] + flags + ["--", "python", script]
    code, lines, err = run(argv, cwd, clean_env(), timeout=600)
    assert code == 0 and lines and os.path.isdir(lines[-1]), err[-3000:]
    assert verify_bundle(lines[-1]) == []
    return lines[-1]


def test_keras_dropout_is_stripped_so_a_healthy_ascend_run_compares_clean(tmp_path):
    npu = _bundle(tmp_path, "npu", ["--backend", "emulated", "--emulate-profile", "ascend"])
    golden = _bundle(tmp_path, "golden", ["--golden-for", npu])
    dropout = [s for s in read_bundle(npu)["randomness"]["sources"] if "dropout" in s["op"]]
    assert dropout, read_bundle(npu)["randomness"]
    # TF 1.15: a cond branch in the main graph (stripped); TF 2.x: an If function body (pinned).
    assert all(s["action"].startswith("pinned" if TF2 else "stripped") for s in dropout), dropout
    code, lines, err = run(CLI + ["compare", npu, golden], str(tmp_path), clean_env())
    out = "\n".join(lines)
    assert code == 0, out + err[-2000:]
    assert "verdict: PASS" in out, out
