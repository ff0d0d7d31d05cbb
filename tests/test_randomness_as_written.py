"""Randomness as users write it (issue #21): dropout with a placeholder or tensor keep_prob/rate is
stripped to the identity (it crashed ``begin()`` on TF 1.15), ``pin``/``strip`` seed Python's
``random`` and numpy's global generator, and a seed taken from the clock is reported as not
reproducible. Real TF graphs on both stacks, no mocks."""
import json
import logging
import os
import random
import time

import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook import DumpOptions, NpuDumpSession, session_config
from npu_dump_hook.bundle import read_bundle, verify_bundle
from npu_dump_hook.determinism import (CLOCK_SEED_YEARS, DEFAULT_SEED, apply_policy, audit, clock_reading,
                                       derived_seed)

v1 = tf.compat.v1
TF1 = tf.__version__.startswith("1.")


# -- dropout with a tensor rate ---------------------------------------------------------------
def _keep_prob_placeholder():
    keep_prob = v1.placeholder(tf.float32)  # no shape: the classic raw-CNN idiom
    return keep_prob, {keep_prob: 0.5}


def _keep_prob_with_default():
    return v1.placeholder_with_default(0.5, []), {}


DROPOUTS = {
    # v1.nn.dropout(x, keep_prob) with keep_prob a placeholder of unknown shape
    "keep_prob_placeholder": lambda x: _dropout_keep_prob(x, _keep_prob_placeholder()),
    "keep_prob_placeholder_with_default": lambda x: _dropout_keep_prob(x, _keep_prob_with_default()),
    # what tf_upgrade_v2 writes: rate=1 - keep_prob
    "rate_one_minus_keep_prob": lambda x: _dropout_rate(x, *_keep_prob_placeholder()),
    "rate_placeholder_with_default": lambda x: _dropout_rate(x, *_keep_prob_with_default()),
}


def _dropout_keep_prob(x, keep_prob_and_feed):
    keep_prob, feed = keep_prob_and_feed
    return v1.nn.dropout(x, keep_prob), feed


def _dropout_rate(x, keep_prob, feed):
    return tf.nn.dropout(x, rate=1 - keep_prob), feed


def _dropout_graph(form):
    """x (batch size unknown) -> dropout -> loss = sum(dropped * weights); with d loss / d x."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 50])
        dropped, feed = DROPOUTS[form](x)
        weights = tf.constant(np.arange(1, 51, dtype=np.float32))
        grad = v1.gradients(tf.reduce_sum(dropped * weights), x)[0]
    return graph, x, dropped, grad, feed


def _run_dropout(graph, x, dropped, grad, feed):
    values = np.arange(1, 201, dtype=np.float32).reshape(4, 50)
    with v1.Session(graph=graph) as session:
        feed = dict(feed)
        feed[x] = values
        return session.run([dropped, grad], feed), values


@pytest.mark.parametrize("form", sorted(DROPOUTS))
def test_strip_makes_tensor_rate_dropout_the_identity_forward_and_backward(form):
    graph, x, dropped, grad, feed = _dropout_graph(form)
    report = apply_policy(graph, "strip")
    entries = [s for s in report["sources"] if s["category"] == "dropout"]
    assert len(entries) == 1 and entries[0]["action"].startswith("stripped (mask keeps all"), report["sources"]
    assert report["not_handled"] == [] and report["not_reproducible"] == []
    (out, gradient), values = _run_dropout(graph, x, dropped, grad, feed)
    assert np.array_equal(out, values)  # identity, whatever keep_prob was fed
    assert np.array_equal(gradient, np.tile(np.arange(1, 51, dtype=np.float32), (4, 1)))


@pytest.mark.parametrize("form", sorted(DROPOUTS))
def test_tensor_rate_dropout_drops_without_strip(form):
    # The control: the same graph under "pin" still drops and scales, so the test above can fail.
    graph, x, dropped, grad, feed = _dropout_graph(form)
    report = apply_policy(graph, "pin")
    assert [s["action"].split()[0] for s in report["sources"]] == ["pinned"]
    (out, _), values = _run_dropout(graph, x, dropped, grad, feed)
    assert not np.array_equal(out, values)
    assert set(np.unique(out / values)) <= {0.0, 2.0}


def test_a_mask_built_like_dropout_without_a_known_scale_is_pinned_and_reported():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4, 5])
        mask = tf.cast(v1.random_uniform([4, 5]) >= 0.3, tf.float32)  # hand-made, no 1 / keep_prob scale
        masked = x * mask
    report = apply_policy(graph, "strip")
    [entry] = report["not_handled"]
    assert entry["category"] == "dropout" and "scale is not recognised" in entry["action"]
    random_op = graph.get_operation_by_name("random_uniform/RandomUniform")
    assert entry["action"].endswith("pinned (seed={}, seed2={})".format(DEFAULT_SEED, derived_seed(random_op.name)))
    assert random_op.get_attr("seed2") == derived_seed(random_op.name)
    assert masked.op.inputs[1] is mask  # left as the user built it


ISSUE_SCRIPT_STEPS = 3


def _issue_script(tmp_path):
    """Issue #21's minimal script (item 1), wrapped by hand, with numpy-shuffled feed_dict batches."""
    options = DumpOptions(enable_dump=True, dump_path=str(tmp_path / "dump"))
    data = np.ones((12, 8), dtype=np.float32)
    with tf.Graph().as_default():
        X = v1.placeholder(tf.float32, [None, 8])
        keep_prob = v1.placeholder(tf.float32)
        w = v1.Variable(tf.ones([8, 2]))
        h = v1.nn.dropout(tf.matmul(X, w), keep_prob)
        train = v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(h))
        with NpuDumpSession(v1.Session(config=session_config(options)), options, stop="continue",
                            backend="emulated", output_dir=str(tmp_path / "out")) as sess:
            sess.run(v1.global_variables_initializer())
            orders = []
            for _ in range(ISSUE_SCRIPT_STEPS):
                orders.append(np.random.permutation(len(data)).tolist())
                sess.run(train, {X: data[orders[-1][:4]], keep_prob: 0.8})
            return sess.hook, sess.run(w), orders


def test_issue_script_with_placeholder_keep_prob_trains_with_dropout_stripped(tmp_path):
    hook, weights, orders = _issue_script(tmp_path)
    # dropout is the identity: d sum(X w) / dw = 4 (four rows of ones) for every weight, each step
    assert np.allclose(weights, 1 - 0.1 * 4 * ISSUE_SCRIPT_STEPS)
    with open(os.path.join(hook.run_dir, "run.json")) as handle:
        randomness = json.load(handle)["randomness"]
    assert [s["action"].split()[0] for s in randomness["sources"]] == ["stripped"]
    assert randomness["host_generators"] == {"random": DEFAULT_SEED, "numpy": DEFAULT_SEED}
    # numpy was seeded at begin(): the script's shuffles are the seed's, in every run
    expected = np.random.RandomState(DEFAULT_SEED)
    assert orders == [expected.permutation(12).tolist() for _ in orders]
    assert verify_bundle(hook.bundle.path) == []
    assert read_bundle(hook.bundle.path)["randomness"]["host_generators"]["numpy"] == DEFAULT_SEED


# -- Python's random and numpy's global generator ---------------------------------------------
def _empty_graph():
    graph = tf.Graph()
    with graph.as_default():
        tf.constant(1.0)
    return graph


@pytest.mark.parametrize("policy", ["pin", "strip"])
def test_pin_and_strip_seed_python_and_numpy_generators(policy):
    report = apply_policy(_empty_graph(), policy, seed=7)
    assert report["host_generators"] == {"random": 7, "numpy": 7}
    drawn = (random.random(), np.random.rand())
    assert drawn == (random.Random(7).random(), np.random.RandomState(7).rand())


def test_numpy_gets_the_seed_modulo_two_to_the_32():
    seed = 2 ** 40 + 5
    report = apply_policy(_empty_graph(), "pin", seed=seed)
    assert report["host_generators"] == {"random": seed, "numpy": 5}
    assert random.random() == random.Random(seed).random()


def test_audit_reports_generators_unseeded_and_leaves_them_alone():
    random.seed(3)
    np.random.seed(3)
    report = apply_policy(_empty_graph(), "audit")
    assert report["host_generators"] == {"random": None, "numpy": None}
    assert (random.random(), np.random.rand()) == (random.Random(3).random(), np.random.RandomState(3).rand())


# -- seeds from the clock ---------------------------------------------------------------------
def test_clock_reading_rule():
    now = 1.8e9
    year = 365 * 86400
    assert clock_reading((0, int(now)), now=now).startswith("seed2={} is the clock time 2027-01-15".format(int(now)))
    assert clock_reading((int(now - CLOCK_SEED_YEARS * year) + 1, 0), now=now).startswith("seed=")
    # TF's default graph seed (87654321) and seeds people type are far below the window
    for seeds in [(0, 0), (42, 7), (87654321, 1), (DEFAULT_SEED, 1),
                  (int(now - CLOCK_SEED_YEARS * year) - 1, 0), (int(now) + 2 * 86400, 0)]:
        assert clock_reading(seeds, now=now) is None, seeds


def _clock_seeded_graph():
    graph = tf.Graph()
    with graph.as_default():
        clock = int(time.time())
        mapped = tf.data.Dataset.range(4).map(lambda i: tf.cast(i, tf.float32) + tf.random.uniform([], seed=clock))
        v1.data.make_one_shot_iterator(mapped).get_next()
        v1.random_uniform([2], seed=clock, name="clock_uniform")
        v1.random_uniform([2], seed=42, name="fixed_uniform")
    return graph, clock


@pytest.mark.parametrize("policy", ["pin", "strip"])
def test_clock_seeds_are_reported_not_reproducible_and_kept(policy, caplog):
    graph, clock = _clock_seeded_graph()
    with caplog.at_level(logging.WARNING, logger="npu_dump_hook.determinism"):
        report = apply_policy(graph, policy)
    flagged = sorted((s["category"], s["action"].split(":", 1)[0]) for s in report["not_reproducible"])
    assert flagged == [("function_stateful", "clock-seeded (not reproducible"),
                       ("stateful", "clock-seeded (not reproducible")]
    assert all("seed2={}".format(clock) in s["action"] and "kept" in s["action"] for s in report["not_reproducible"])
    assert graph.get_operation_by_name("clock_uniform/RandomUniform").get_attr("seed2") == clock
    fixed = [s for s in report["sources"] if s["op"] == "fixed_uniform/RandomUniform"]
    assert fixed[0]["action"].startswith("kept user seeds")
    assert sum("clock-seeded" in r.getMessage() for r in caplog.records) == 2


def test_clock_seeds_under_audit_are_reported():
    graph, clock = _clock_seeded_graph()
    clocked = [s for s in audit(graph) if s["action"].startswith("clock-seeded")]
    assert len(clocked) == 2 and all(s["action"].endswith("reported)") or "reported, inside" in s["action"]
                                     for s in clocked)


def test_a_graph_seed_from_the_clock_is_reported():
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(int(time.time()))
        v1.random_normal([3], name="noise")
    report = apply_policy(graph, "pin")
    assert [s["op"] for s in report["not_reproducible"]] == ["noise/RandomStandardNormal"]
    assert report["not_reproducible"][0]["action"].startswith("clock-seeded (not reproducible: seed=")
