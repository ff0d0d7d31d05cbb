"""Keras under ``npu-dump-hook run`` and by hand, both stacks, real TensorFlow, scripts written here.

Keras in graph mode (TF 1.15; TF 2.x after ``tf.compat.v1.disable_eager_execution()``) runs its
train function through ``Session._make_callable_from_options``, not ``Session.run``; the runner
routes those callables through the wrapped session, so ``fit``/``train_on_batch`` give one
training step's bundle, and the two-process workflow (emulated ascend NPU run, ``--golden-for``,
``compare``) names a planted fault first. ``model_to_estimator``'s checkpoint-saving session
(which runs ``set_weights``) is not the training: the Estimator's training is. Eager Keras stops
with one line; a script that ends without a bundle exits ``EXIT_NO_BUNDLE``.

Keras ``fit`` shuffles with numpy's global generator and the script draws its data from it
unseeded: the golden run sees the NPU step's batch by input replay. By hand, Keras makes its
optimizer's variables in ``fit``, after the session was wrapped: they are in the initial state
all the same, and a golden run by hand restores them.
"""
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook._cli_conventions import EXIT_NO_BUNDLE
from npu_dump_hook.bundle import read_bundle, verify_bundle

from helpers.runs import clean_env, run

DOUBLE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "npu_bridge_double")

CLI = [sys.executable, "-m", "npu_dump_hook"]
TF2 = tf.__version__.startswith("2")
FAULT_OP = "dense_1/MatMul"  # the second Dense layer: dense upstream, the loss downstream

SCRIPT = '''
import sys
import numpy as np
import tensorflow as tf

mode = sys.argv[1]
if mode != "eager" and tf.__version__.startswith("2"):
    tf.compat.v1.disable_eager_execution()
x = np.random.rand(64, 8).astype("float32")
y = np.random.rand(64, 2).astype("float32")
model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation="relu", input_shape=(8,)),
                             tf.keras.layers.Dense(2)])
optimizers = getattr(tf.keras.optimizers, "legacy", tf.keras.optimizers)  # TF 2.11+: graph mode needs legacy
model.compile(optimizer=optimizers.SGD(0.1), loss="mse")
if mode in ("fit", "eager"):
    model.fit(x, y, batch_size=16, epochs=2, verbose=0)
elif mode == "train_on_batch":
    for start in range(0, 64, 16):
        model.train_on_batch(x[start:start + 16], y[start:start + 16])
elif mode == "by_hand":  # [NPU_BUNDLE]: the golden run of that bundle
    from npu_dump_hook import NpuDumpSession
    extra = {"initial_state": sys.argv[2]} if len(sys.argv) > 2 else {"backend": "emulated"}
    model.compile(optimizer=optimizers.Adam(0.01), loss="mse")  # its slots are made in fit, after wrapping
    tf.compat.v1.keras.backend.set_session(NpuDumpSession(tf.compat.v1.Session(), output_dir="out", **extra))
    model.fit(x, y, batch_size=16, epochs=2, verbose=0)
elif mode == "estimator":
    print("predicted", model.predict(x[:2]).shape)  # weights initialized: the conversion runs set_weights
    def input_fn():
        data = tf.data.Dataset.from_tensor_slices(({model.input_names[0]: x}, y))
        return data.repeat().batch(16)
    estimator = tf.keras.estimator.model_to_estimator(keras_model=model, model_dir="model_dir")
    estimator.train(input_fn, steps=3)
elif mode == "npu_estimator":  # the npu_bridge double's keras_to_npu (tests/npu_bridge_double)
    from npu_bridge.estimator.npu.keras_to_npu import model_to_npu_estimator
    from npu_bridge.estimator.npu.npu_config import NPURunConfig
    print("predicted", model.predict(x[:2]).shape)
    def input_fn():
        data = tf.data.Dataset.from_tensor_slices(({model.input_names[0]: x}, y))
        return data.repeat().batch(16)
    estimator = model_to_npu_estimator(keras_model=model, config=NPURunConfig(model_dir="model_dir"))
    estimator.train(input_fn, steps=3)
elif mode == "callable":  # Session.make_callable, the public form of what Keras uses
    v1 = tf.compat.v1
    X = v1.placeholder(tf.float32, [None, 8])
    w = v1.get_variable("w", initializer=np.ones((8, 2), np.float32))
    loss = tf.reduce_mean(tf.square(tf.matmul(X, w) - y[:16]))
    train = v1.train.GradientDescentOptimizer(0.01).minimize(loss)
    sess = v1.Session()
    sess.run(v1.global_variables_initializer())
    step = sess.make_callable([loss, train], feed_list=[X])
    for _ in range(3):
        print("loss", step(x[:16])[0])
elif mode == "no_training":
    with tf.compat.v1.Session() as sess:
        print("value", sess.run(tf.constant(1.0) * 2))
print("script ended")
'''


def _script(folder):
    path = os.path.join(str(folder), "keras_train.py")
    if not os.path.exists(path):
        with open(path, "w") as handle:
            handle.write(SCRIPT)
    return path


def _run(folder, name, mode, flags=(), env=None):
    """``npu-dump-hook run FLAGS -- python keras_train.py MODE`` in ``folder/name``: (status, stdout lines, stderr)."""
    cwd = os.path.join(str(folder), name)
    os.makedirs(cwd)
    argv = CLI + ["run", "--output-dir", os.path.join(cwd, "out")] + list(flags) + ["--", _script(folder), mode]
    return run(argv, cwd, env or clean_env(), timeout=600)


def _bundle(code, lines, err):
    assert code == 0 and lines and os.path.isdir(lines[-1]), err[-3000:]
    assert verify_bundle(lines[-1]) == []
    return lines[-1]


def _one_training_step(bundle):
    doc = read_bundle(bundle)
    run_dir = os.path.dirname(os.path.dirname(bundle))
    with open(os.path.join(run_dir, os.path.basename(bundle), "run.json")) as handle:
        record = json.load(handle)
    assert doc["run"]["steps"] == 1
    (counted,) = record["counted_steps"]
    assert counted["training"] and any("Apply" in name for name in counted["updates"]), counted
    return doc, record


def _compare(folder, npu, golden):
    code, lines, err = run(CLI + ["compare", npu, golden], str(folder), clean_env())
    assert code in (0, 1), err[-3000:]
    return code, "\n".join(lines)


@pytest.fixture(scope="module")
def fit_runs(tmp_path_factory):
    """Keras fit: a faulted and a healthy emulated ascend run, and the golden run of each."""
    folder = tmp_path_factory.mktemp("keras_fit")
    ascend = ["--backend", "emulated", "--emulate-profile", "ascend"]
    runs = {"folder": folder,
            "healthy": _bundle(*_run(folder, "healthy", "fit", ascend)),
            "faulted": _bundle(*_run(folder, "faulted", "fit", ascend + ["--fault", FAULT_OP + "=scale=1.05"]))}
    for key in ("healthy", "faulted"):
        runs[key + "_golden"] = _bundle(*_run(folder, key + "_golden", "fit", ["--golden-for", runs[key]]))
    return runs


def test_keras_fit_in_graph_mode_gives_one_training_step(fit_runs):
    doc, record = _one_training_step(fit_runs["healthy"])
    assert doc["backend"] == "emulated" and doc["run"]["emulator"]["profile"] == "ascend"
    dumped = {entry["op_name"] for entry in doc["files"] if entry["kind"] == "dump"}
    assert any("gradients" in name for name in dumped) and any("MatMul" in name for name in dumped), dumped
    (counted,) = record["counted_steps"]
    assert any(name.startswith("loss") for name in counted["fetches"]), counted  # Keras's train function


def test_keras_fit_golden_runs_match_and_compare_names_the_fault_first(fit_runs):
    for key in ("healthy", "faulted"):
        npu, golden = read_bundle(fit_runs[key]), read_bundle(fit_runs[key + "_golden"])
        assert golden["backend"] == "reference" and golden["golden_for"]["match"] is True
        assert golden["fingerprints"]["state"] == npu["fingerprints"]["state"]
        assert golden["fingerprints"]["batch"] == npu["fingerprints"]["batch"] and npu["fingerprints"]["batch"]
    code, out = _compare(fit_runs["folder"], fit_runs["healthy"], fit_runs["healthy_golden"])
    assert code == 0, out
    code, out = _compare(fit_runs["folder"], fit_runs["faulted"], fit_runs["faulted_golden"])
    assert code == 1 and "first divergence: " in out, out
    assert FAULT_OP in out.split("first divergence: ")[1].splitlines()[0], out


def test_keras_train_on_batch_gives_one_training_step_and_stops(tmp_path):
    code, lines, err = _run(tmp_path, "tob", "train_on_batch")
    _one_training_step(_bundle(code, lines, err))
    assert "script ended" not in lines  # stop=exit after the dumped step


def test_make_callable_runs_are_steps_and_keep_working_after_the_dump(tmp_path):
    code, lines, err = _run(tmp_path, "callable", "callable", ["--stop", "continue"])
    _one_training_step(_bundle(code, lines, err))
    losses = [float(line.split()[1]) for line in lines if line.startswith("loss ")]
    assert len(losses) == 3 and losses[0] > losses[1] > losses[2], lines  # trained on after the dumped step
    assert "script ended" in lines


def test_npu_dump_session_make_callable_by_hand(tmp_path):
    from npu_dump_hook import NpuDumpSession

    v1 = tf.compat.v1
    with tf.Graph().as_default():
        X = v1.placeholder(tf.float32, [None, 3])
        w = v1.get_variable("w", initializer=np.ones((3, 1), np.float32))
        loss = tf.reduce_mean(tf.matmul(X, w))
        train = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        sess = NpuDumpSession(v1.Session(), stop="continue", output_dir=str(tmp_path / "out"))
        sess.run(v1.global_variables_initializer())
        step = sess.make_callable([loss, train], feed_list=[X])
        values = [step(np.ones((4, 3), np.float32))[0] for _ in range(3)]
        assert sess.finished and sess.hook.summary["steps"] == 1
        assert verify_bundle(sess.hook.bundle.path) == []
        sess.close()
    assert values == pytest.approx([3.0, 2.7, 2.4])  # each call one step: routed, then the session's own


def test_keras_by_hand_with_npu_dump_session_as_the_keras_session(tmp_path):
    script = _script(tmp_path)
    os.makedirs(str(tmp_path / "golden"))
    code, lines, err = run([sys.executable, script, "by_hand"], str(tmp_path), clean_env())
    npu = _bundle(code, lines, err)
    doc, _record = _one_training_step(npu)
    assert "script ended" not in lines
    # Adam's slots and counters, made by fit after the session was wrapped, are in the initial state
    state = {entry["name"] for entry in doc["fingerprints"]["state"]}
    assert len([name for name in state if "Adam" in name]) >= 9, state  # m and v of 4 weights, iterations
    init = os.path.join(npu, "data", "init")
    prefix = os.path.join(init, next(name for name in os.listdir(init) if name.endswith(".index"))[:-6])
    assert {name for name, _ in tf.train.list_variables(prefix)} == state
    assert doc["coverage"]["missing"] == [] and any("Adam" in f["op_name"] for f in doc["files"] if f["kind"] == "dump")
    code, lines, err = run([sys.executable, script, "by_hand", npu], str(tmp_path / "golden"), clean_env())
    golden = read_bundle(_bundle(code, lines, err))
    assert golden["golden_for"]["match"] is True and golden["fingerprints"]["state"] == doc["fingerprints"]["state"]
    code, out = _compare(tmp_path, npu, lines[-1])
    assert code == 0, out


def _estimator_bundle(code, lines, err, model_dir):
    bundle = _bundle(code, lines, err)
    _doc, record = _one_training_step(bundle)
    assert record["global_step"] == {"before": 0, "after": 1}  # the Estimator's training step, not set_weights
    assert "script ended" in lines  # Estimator.train returns after the dumped step
    assert os.listdir(os.path.join(model_dir, "keras"))  # the conversion's own checkpoint, where TF puts it
    assert not os.path.exists(os.path.join(model_dir, "checkpoint"))  # the training ran in the run folder
    return bundle


def test_keras_to_estimator_hooks_the_training_not_the_conversion(tmp_path):
    ascend = ["--backend", "emulated", "--emulate-profile", "ascend"]
    npu = _estimator_bundle(*_run(tmp_path, "k2e", "estimator", ascend),
                            model_dir=os.path.join(str(tmp_path), "k2e", "model_dir"))
    golden = _bundle(*_run(tmp_path, "k2e_golden", "estimator", ["--golden-for", npu]))
    npu_doc, golden_doc = read_bundle(npu), read_bundle(golden)
    assert golden_doc["golden_for"]["match"] is True
    assert golden_doc["fingerprints"]["state"] == npu_doc["fingerprints"]["state"]
    assert golden_doc["fingerprints"]["batch"] == npu_doc["fingerprints"]["batch"]
    code, out = _compare(tmp_path, npu, golden)
    assert code == 0, out
    fault = ["--fault", FAULT_OP + "=scale=1.05"]
    faulted = _estimator_bundle(*_run(tmp_path, "k2e_fault", "estimator", ascend + fault),
                                model_dir=os.path.join(str(tmp_path), "k2e_fault", "model_dir"))
    golden = _bundle(*_run(tmp_path, "k2e_fault_golden", "estimator", ["--golden-for", faulted]))
    code, out = _compare(tmp_path, faulted, golden)
    assert code == 1 and FAULT_OP in out.split("first divergence: ")[1].splitlines()[0], out


def test_npu_bridge_keras_to_npu_estimator_hooks_the_training_not_the_conversion(tmp_path):
    path = os.pathsep.join(filter(None, [DOUBLE_DIR, os.environ.get("PYTHONPATH")]))
    env = clean_env(JOB_ID="10086", PYTHONPATH=path)  # the double's NPUEstimator needs a JOB_ID, as the real one
    _estimator_bundle(*_run(tmp_path, "k2npu", "npu_estimator", ["--backend", "emulated"], env=env),
                      model_dir=os.path.join(str(tmp_path), "k2npu", "model_dir"))


def test_a_script_that_ends_without_a_bundle_exits_no_bundle(tmp_path):
    code, lines, err = _run(tmp_path, "none", "no_training")
    assert code == EXIT_NO_BUNDLE == 4 and "script ended" in lines, err[-2000:]
    assert "no training was seen" in err and "no bundle was written: exit status 4" in err
    code, lines, err = _run(tmp_path, "allowed", "no_training", ["--allow-no-bundle"])
    assert code == 0 and "script ended" in lines, err[-2000:]
    assert not os.path.isdir(os.path.join(str(tmp_path), "none", "out", "bundles"))


@pytest.mark.skipif(not TF2, reason="TF 1.15 runs graph mode by default")
def test_eager_keras_stops_with_one_line_saying_what_to_do(tmp_path):
    code, lines, err = _run(tmp_path, "eager", "eager")
    assert code == EXIT_NO_BUNDLE and "script ended" not in lines, err[-2000:]
    ours = [line for line in err.splitlines() if line.startswith("npu-dump-hook:")]
    assert ours == ["npu-dump-hook: Keras Model.fit runs eagerly (the TF 2.x default): npu_dump_hook dumps "
                    "graph-mode training only; call tf.compat.v1.disable_eager_execution() at the top of the "
                    "script (nothing dumped; the script stops before training)"], ours
    code, lines, err = _run(tmp_path, "allowed", "eager", ["--allow-no-bundle"])
    assert code == 0 and "script ended" in lines and "runs eagerly" in err, err[-2000:]
