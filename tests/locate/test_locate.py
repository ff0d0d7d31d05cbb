"""Tests for npu_dump_hook.locate: graph folders, Build graph choice, dump folders."""
import datetime
import os
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_dump_hook.formats import ge_graph
from npu_dump_hook.errors import AmbiguousGraphError, LocateError, OptionError
from npu_dump_hook.locate import (
    LocatedRun,
    StepDir,
    expand_graph_dir,
    find_build_graphs,
    find_step_dirs,
    graph_search_dirs,
    locate_run,
    select_training_graph,
)

# A fixed local begin time: 2026-11-29 08:30:00.700 local.
BEGIN = datetime.datetime(2026, 11, 29, 8, 30, 0, 700000).timestamp()
TRAIN = "ge_default_20261129083005_1"
EVAL = "ge_default_20261129083107_11"
INIT = "ge_default_20261129083003_21"


# --------------------------------------------------------------------------- writers (as GE does)


def write_graph_file(path, name, ops):
    """Write a Build graph as GE does (``graph { name: ... op { ... } }``) with the formats writer."""
    built = [
        ge_graph.make_op(op[0], op[1], index,
                         original_op_names=op[2] if len(op) > 2 else None,
                         no_task=op[3] if len(op) > 3 else None)
        for index, op in enumerate(ops)
    ]
    ge_graph.write_graph_text(path, ge_graph.make_model([(name, built)]))


FORWARD = [
    ("atomic_addr_clean0_71", "AtomicAddrClean"),
    ("dense/MatMul", "MatMul"),
    ("dense/BiasAdd", "BiasAdd"),
    ("loss/Softmax", "SoftmaxV2"),
]
ITERATOR = [("IteratorGetNext", "IteratorGetNext", None, True)]
TRAINING = [
    ("gradients/dense/MatMul_grad/MatMul_1", "MatMul"),
    ("gradients/dense/BiasAdd_grad/BiasAddGrad", "BiasAddGrad"),
    ("GradientDescent/update_dense/kernel/ResourceApplyGradientDescent", "ApplyGradientDescent"),
]
TRAIN_OPS = ITERATOR + FORWARD + TRAINING
EVAL_OPS = ITERATOR + FORWARD + [("accuracy/ArgMax", "ArgMaxV2")]
INIT_OPS = [("dense/kernel/Initializer/random_uniform", "RandomUniform"), ("dense/kernel/Assign", "Assign")]


def write_graph(folder, index, name, ops, stage="Build", mtime=None):
    os.makedirs(str(folder), exist_ok=True)
    path = os.path.join(str(folder), "ge_proto_{:08d}_graph_{}_{}.txt".format(index, index, stage))
    write_graph_file(path, name, ops)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def time_dir(when):
    return datetime.datetime.fromtimestamp(when).strftime("%Y%m%d%H%M%S")


def make_steps(dump, tdir, dev, model, steps, model_id="1", mtime=None):
    """Create {dump}/{tdir}/{dev}/{model}/{model_id}/{step}/ with one dump file each."""
    for step in steps:
        path = os.path.join(str(dump), tdir, str(dev), model, model_id, str(step))
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "MatMul.dense_MatMul.3.0.1796000000000000"), "wb") as handle:
            handle.write(b"\0" * 8)
    if mtime is not None:
        for dirpath, dirnames, filenames in os.walk(os.path.join(str(dump), tdir)):
            for name in dirnames + filenames:
                os.utime(os.path.join(dirpath, name), (mtime, mtime))
            os.utime(dirpath, (mtime, mtime))


# --------------------------------------------------------------------------- graph folders


def test_search_dirs_follow_env_priority_and_pid_subfolders(tmp_path):
    graph = tmp_path / "graphs"
    for sub in ("pid_4242_deviceid_0", "4243_1", "notes", "pid_x_deviceid_0"):
        (graph / sub).mkdir(parents=True)
    collect = tmp_path / "collect" / "extra-info" / "graph" / "4242_0"
    collect.mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    env = {
        "DUMP_GRAPH_PATH": str(graph),
        "NPU_COLLECT_PATH": str(tmp_path / "collect"),
        "ASCEND_DUMP_PATH": str(tmp_path / "missing"),
        "ASCEND_WORK_PATH": str(work),
    }
    assert graph_search_dirs(env, cwd=str(tmp_path)) == [
        str(graph),
        str(graph / "4243_1"),
        str(graph / "pid_4242_deviceid_0"),
        str(tmp_path / "collect" / "extra-info" / "graph"),
        str(collect),
        str(work),
    ]


def test_search_dirs_filter_by_pid_and_device(tmp_path):
    for sub in ("pid_10_deviceid_0", "pid_11_deviceid_1", "10_0", "12_0"):
        (tmp_path / sub).mkdir()
    env = {"DUMP_GRAPH_PATH": str(tmp_path)}
    assert graph_search_dirs(env, pid=10) == [str(tmp_path), str(tmp_path / "10_0"), str(tmp_path / "pid_10_deviceid_0")]
    assert expand_graph_dir(str(tmp_path), device_id="1") == [str(tmp_path), str(tmp_path / "pid_11_deviceid_1")]


def test_search_dirs_fall_back_to_cwd_only_without_env_folders(tmp_path):
    (tmp_path / "pid_1_deviceid_0").mkdir()
    assert graph_search_dirs({}, cwd=str(tmp_path)) == [str(tmp_path), str(tmp_path / "pid_1_deviceid_0")]
    env = {"DUMP_GRAPH_PATH": str(tmp_path / "not_there")}
    assert graph_search_dirs(env, cwd=str(tmp_path)) == [str(tmp_path), str(tmp_path / "pid_1_deviceid_0")]
    assert expand_graph_dir(str(tmp_path / "not_there")) == []


def test_find_build_graphs_keeps_only_fresh_build_stage(tmp_path):
    fresh = BEGIN + 5
    keep_new = write_graph(tmp_path, 7, TRAIN, TRAIN_OPS, mtime=fresh)
    # Same second as begin but a little before it (coarse kernel clock): still this run.
    same_second = write_graph(tmp_path, 3, INIT, INIT_OPS, mtime=BEGIN - 0.5)
    write_graph(tmp_path, 1, "old", TRAIN_OPS, mtime=BEGIN - 1.0)  # stale previous run
    write_graph(tmp_path, 8, TRAIN, TRAIN_OPS, stage="PreRunAfterBuild", mtime=fresh)
    write_graph(tmp_path, 9, TRAIN, TRAIN_OPS, stage="PreRunBegin", mtime=fresh)
    onnx = tmp_path / "ge_onnx_00000007_graph_7_Build.pbtxt"
    onnx.write_text("graph {}")
    os.utime(str(onnx), (fresh, fresh))
    old_style = tmp_path / "ge_proto_00292_Build.txt"
    write_graph_file(str(old_style), EVAL, EVAL_OPS)
    os.utime(str(old_style), (fresh, fresh))
    assert find_build_graphs([str(tmp_path)], since=BEGIN) == [same_second, keep_new, str(old_style)]
    assert len(find_build_graphs([str(tmp_path)])) == 4


def test_find_build_graphs_orders_by_folder_then_index_without_duplicates(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    in_second = write_graph(second, 1, TRAIN, TRAIN_OPS)
    in_first = write_graph(first, 5, TRAIN, TRAIN_OPS)
    assert find_build_graphs([str(first), str(second), str(first)]) == [in_first, in_second]


# --------------------------------------------------------------------------- graph choice


def test_train_beats_eval_by_apply_ops_without_tf_graph(tmp_path):
    train = write_graph(tmp_path, 5, TRAIN, TRAIN_OPS)
    evaluation = write_graph(tmp_path, 11, EVAL, EVAL_OPS)
    init = write_graph(tmp_path, 2, INIT, INIT_OPS)
    path, choice = select_training_graph([init, train, evaluation])
    assert path == train
    assert choice["method"] == "training_ops"
    assert choice["rules"] == [{"rule": "training_ops", "kept": 1}]
    rows = {row["file"]: row for row in choice["candidates"]}
    assert rows[train]["chosen"] and not rows[evaluation]["chosen"]
    assert rows[train]["graph_name"] == TRAIN
    assert rows[train]["training_ops"] == 3
    assert rows[evaluation]["training_ops"] == 0
    assert rows[init]["iterator_ops"] == []
    assert rows[train]["op_count"] == len(TRAIN_OPS)
    assert rows[evaluation]["reason"].startswith("ruled out")


def test_feed_dict_training_graph_beats_eval_graph_with_iterator(tmp_path):
    train = write_graph(tmp_path, 1, TRAIN, FORWARD + TRAINING)  # fed by feed_dict: no iterator
    evaluation = write_graph(tmp_path, 2, EVAL, EVAL_OPS)
    path, choice = select_training_graph([evaluation, train])
    assert path == train and choice["method"] == "training_ops"


def test_iterator_decides_when_no_graph_trains(tmp_path):
    infer = write_graph(tmp_path, 1, EVAL, ITERATOR + FORWARD)
    init = write_graph(tmp_path, 2, INIT, INIT_OPS)
    with_get_next = write_graph(tmp_path, 3, TRAIN, [("dynamic_getnext", "DynamicGetNext")] + FORWARD)
    path, choice = select_training_graph([init, infer])
    assert path == infer and choice["method"] == "iterator"
    assert choice["candidates"][1]["iterator_ops"] == ["IteratorGetNext (IteratorGetNext)"]
    assert select_training_graph([init, with_get_next])[0] == with_get_next


SEED_GUIDE_GRAPH = """graph {
  name: "ge_default_20240613143502_1"
  op {
    name: "atomic_addr_clean0_71"
    type: "AtomicAddrClean"
    attr {
      key: "_fe_imply_type"
      value {
        i: 6
      }
    }
  }
  op {
    name: "IteratorV2"
    type: "IteratorV2"
    attr {
      key: "_no_task"
      value {
        b: true
      }
    }
  }
  op {
    name: "GradientDescent/update_w/ApplyGradientDescent"
    type: "ApplyGradientDescent"
  }
}
graph {
  name: "sub_graph_1"
}
"""


def test_hand_written_ge_text_selects_first_graph_name(tmp_path):
    # Layout of the seed guide's example, typed by hand (not produced by our writer).
    train = tmp_path / "ge_proto_00292_Build.txt"
    train.write_text(SEED_GUIDE_GRAPH)
    evaluation = write_graph(tmp_path, 293, EVAL, EVAL_OPS)
    run = locate_run_for(tmp_path, [str(train), evaluation])
    assert run == (str(train), "ge_default_20240613143502_1", 1)


def locate_run_for(tmp_path, graphs):
    path, choice = select_training_graph(graphs)
    row = next(c for c in choice["candidates"] if c["chosen"])
    return path, row["graph_name"], row["training_ops"]


def test_optimizer_update_alone_marks_training(tmp_path):
    # A fused graph with no gradients scope left: the Apply* update still decides.
    train = write_graph(tmp_path, 1, TRAIN, ITERATOR + FORWARD + [("fused_update", "ResourceApplyAdam")])
    evaluation = write_graph(tmp_path, 2, EVAL, EVAL_OPS)
    assert select_training_graph([evaluation, train])[0] == train


def test_method1_tf_op_names_through_original_names(tmp_path):
    # Training graph without iterator (feed_dict); the TF op survives only as a fused original.
    train_ops = [("fused_conv_relu", "Conv2D", ["model/conv/Conv2D", "model/conv/Relu"])]
    train = write_graph(tmp_path, 4, TRAIN, train_ops)
    other = write_graph(tmp_path, 5, "ge_default_20261129083009_31", [("unrelated/Add", "Add")])
    path, choice = select_training_graph([other, train], tf_op_names=["model/conv/Relu", "model/conv/Conv2D"])
    assert path == train
    assert choice["method"] == "tf_op_names"
    rows = {row["file"]: row for row in choice["candidates"]}
    assert rows[train]["tf_op_matches"] == 2 and rows[other]["tf_op_matches"] == 0


def test_method1_compares_sanitized_names(tmp_path):
    train = write_graph(tmp_path, 4, TRAIN, [("model_conv_Conv2D", "Conv2D")])
    other = write_graph(tmp_path, 5, EVAL, [("x", "Add")])
    assert select_training_graph([other, train], tf_op_names=["model/conv.Conv2D"])[0] == train


def test_most_tf_matches_breaks_tie_between_two_training_graphs(tmp_path):
    ops_a = TRAIN_OPS + [("model_a/head/MatMul", "MatMul")]
    ops_b = TRAIN_OPS + [("model_b/head/MatMul", "MatMul"), ("model_b/head/Relu", "Relu")]
    a = write_graph(tmp_path, 1, TRAIN, ops_a)
    b = write_graph(tmp_path, 2, EVAL, ops_b)
    path, choice = select_training_graph([a, b], tf_op_names=["dense/MatMul", "model_a/head/MatMul"])
    assert path == a
    assert choice["method"] == "most_tf_op_names"


def test_keyword_choice(tmp_path):
    a = write_graph(tmp_path, 1, TRAIN, TRAIN_OPS + [("resnet/block1/conv/Conv2D", "Conv2D")])
    b = write_graph(tmp_path, 2, EVAL, TRAIN_OPS + [("bert/encoder/layer_0/MatMul", "MatMul")])
    path, choice = select_training_graph([a, b], graph_keyword="bert/encoder")
    assert path == b
    assert choice["method"] == "graph_keyword"
    assert choice["graph_keyword"] == "bert/encoder"
    # the sanitized form of the keyword matches too, and so does the graph name
    assert select_training_graph([a, b], graph_keyword="resnet_block1")[0] == a
    assert select_training_graph([a, b], graph_keyword=EVAL)[0] == b


def test_keyword_matching_nothing_is_an_error(tmp_path):
    a = write_graph(tmp_path, 1, TRAIN, TRAIN_OPS)
    with pytest.raises(LocateError) as info:
        select_training_graph([a], graph_keyword="no_such_op")
    assert "graph keyword 'no_such_op' is in none of the Build graphs" in str(info.value)
    assert a in str(info.value)


def test_ambiguity_lists_candidates_and_how_to_choose(tmp_path):
    a = write_graph(tmp_path, 1, TRAIN, TRAIN_OPS)
    b = write_graph(tmp_path, 2, EVAL, TRAIN_OPS)
    with pytest.raises(AmbiguousGraphError) as info:
        select_training_graph([a, b])
    text = str(info.value)
    assert "2 of 2 candidates qualify equally" in text
    assert a in text and b in text
    assert repr(TRAIN) in text and repr(EVAL) in text
    assert "graph_keyword=" in text  # the library names its parameter; the CLI rewords it as --graph-keyword
    assert info.value.searched == [a, b]
    assert isinstance(info.value, LocateError)


def test_same_graph_in_two_files_takes_newest_with_warning(tmp_path):
    older = write_graph(tmp_path / "a", 1, TRAIN, TRAIN_OPS, mtime=BEGIN + 1)
    newer = write_graph(tmp_path / "b", 1, TRAIN, TRAIN_OPS, mtime=BEGIN + 2)
    path, choice = select_training_graph([newer, older])
    assert path == newer
    assert choice["method"] == "same_graph_newest"
    assert choice["warnings"] == ["2 files hold graph {!r}; took the newest, {}".format(TRAIN, newer)]


def test_single_candidate_and_unreadable_candidates(tmp_path):
    only = write_graph(tmp_path, 1, INIT, INIT_OPS)
    broken = tmp_path / "ge_proto_00000002_graph_2_Build.txt"
    broken.write_text("op { name: 'x' }\n")  # no graph block
    path, choice = select_training_graph([str(broken), only])
    assert path == only and choice["method"] == "only_candidate"
    assert choice["candidates"][0]["readable"] is False
    assert choice["candidates"][0]["reason"].startswith("unreadable:")
    with pytest.raises(LocateError, match="no readable Build graph"):
        select_training_graph([str(broken)])
    with pytest.raises(LocateError, match="no Build graph file"):
        select_training_graph([])


# --------------------------------------------------------------------------- dump folders


def test_stale_time_folders_are_never_picked(tmp_path):
    old = BEGIN - 3600
    stale = time_dir(old)
    make_steps(tmp_path, stale, 0, TRAIN, [0, 1, 2], mtime=old)  # earlier run, same graph name
    just_before = time_dir(BEGIN - 1)
    make_steps(tmp_path, just_before, 0, TRAIN, [7], mtime=BEGIN - 1)
    fresh = time_dir(BEGIN + 2)
    make_steps(tmp_path, fresh, 0, TRAIN, [0])
    notes = []
    steps = find_step_dirs(str(tmp_path), TRAIN, since=BEGIN, warnings=notes)
    assert steps == [StepDir(fresh, "0", TRAIN, "1", "0", os.path.join(str(tmp_path), fresh, "0", TRAIN, "1", "0"))]
    assert notes == []


def test_time_folder_named_in_the_begin_second_is_this_run(tmp_path):
    same = time_dir(BEGIN)  # GE names it at its start, same second as begin (08:30:00)
    assert same == "20261129083000"
    make_steps(tmp_path, same, 0, TRAIN, [0], mtime=BEGIN + 1)
    assert [s.time_dir for s in find_step_dirs(str(tmp_path), TRAIN, since=BEGIN)] == [same]


def test_folder_named_before_begin_but_written_after_is_taken_with_warning(tmp_path):
    # Long-lived process: GE initialised its dump (and named the folder) before the hook began.
    early = time_dir(BEGIN - 600)
    make_steps(tmp_path, early, 0, TRAIN, [0], mtime=BEGIN + 3)
    notes = []
    steps = find_step_dirs(str(tmp_path), TRAIN, since=BEGIN, warnings=notes)
    assert [s.time_dir for s in steps] == [early]
    assert len(notes) == 1 and "named before the time bound" in notes[0] and early in notes[0]


def test_without_since_newest_run_wins_with_warning(tmp_path):
    make_steps(tmp_path, "20261128101010", 0, TRAIN, [0])
    make_steps(tmp_path, "20261129083001", 0, TRAIN, [3])
    notes = []
    steps = find_step_dirs(str(tmp_path), TRAIN, warnings=notes)
    assert [(s.time_dir, s.step) for s in steps] == [("20261129083001", "3")]
    assert notes == [
        "no time bound (--since): took the newest time folder 20261129083001 for device 0; "
        "older ones ignored: 20261128101010"
    ]


def test_several_devices_in_skewed_time_folders(tmp_path):
    # Multi-card start skew: each card's process named its own time folder.
    t0, t1 = time_dir(BEGIN + 1), time_dir(BEGIN + 3)
    make_steps(tmp_path, t0, 0, TRAIN, [0])
    make_steps(tmp_path, t1, 1, TRAIN, [0])
    make_steps(tmp_path, t1, 10, TRAIN, [0])
    make_steps(tmp_path, t1, 2, EVAL, [0])  # another graph: not ours
    steps = find_step_dirs(str(tmp_path), TRAIN, since=BEGIN)
    assert [(s.time_dir, s.device_id) for s in steps] == [(t0, "0"), (t1, "1"), (t1, "10")]
    only = find_step_dirs(str(tmp_path), TRAIN, since=BEGIN, device_id=1)
    assert [(s.time_dir, s.device_id) for s in only] == [(t1, "1")]


def test_same_device_in_two_fresh_time_folders_takes_newest(tmp_path):
    t0, t1 = time_dir(BEGIN + 1), time_dir(BEGIN + 40)
    make_steps(tmp_path, t0, 0, TRAIN, [0])
    make_steps(tmp_path, t1, 0, TRAIN, [0])
    notes = []
    steps = find_step_dirs(str(tmp_path), TRAIN, since=BEGIN, warnings=notes)
    assert [s.time_dir for s in steps] == [t1]
    assert notes == ["device 0: several time folders since the time bound; took the newest, {}; ignored: {}".format(t1, t0)]


def test_steps_sort_numerically_and_model_name_is_sanitized(tmp_path):
    name = "ge default.graph/1"
    make_steps(tmp_path, "20261129083001", 0, "ge_default_graph_1", [10, 9, 0, 100, 2], model_id="12")
    make_steps(tmp_path, "20261129083001", 0, "ge_default_graph_1", [1], model_id="3")
    os.makedirs(os.path.join(str(tmp_path), "20261129083001", "0", "ge_default_graph_1", "12", "notes"))
    steps = find_step_dirs(str(tmp_path), name)
    assert [(s.model_id, s.step) for s in steps] == [("3", "1"), ("12", "0"), ("12", "2"), ("12", "9"), ("12", "10"), ("12", "100")]
    assert all(s.model_name == "ge_default_graph_1" for s in steps)


def test_nothing_found_says_what_was_searched_where(tmp_path):
    make_steps(tmp_path, time_dir(BEGIN - 7200), 0, TRAIN, [0], mtime=BEGIN - 7200)
    make_steps(tmp_path, time_dir(BEGIN + 5), 0, EVAL, [0])
    (tmp_path / "20200808163566").mkdir()  # all digits, not a calendar time (seconds 66)
    with pytest.raises(LocateError) as info:
        find_step_dirs(str(tmp_path), TRAIN, since=BEGIN, device_id=3)
    text = str(info.value)
    assert "no dump folder {}/{{time}}/{{device_id}}/{}/{{model_id}}/{{step}}".format(tmp_path, TRAIN) in text
    assert "time folders named at or after 20261129083000 (local)" in text
    assert "device 3" in text
    assert time_dir(BEGIN + 5) in text
    assert "20200808163566 (not a YYYYMMDDhhmmss time)" in text
    assert "model folders present: {}/0/{}, {}/0/{}".format(
        time_dir(BEGIN - 7200), TRAIN, time_dir(BEGIN + 5), EVAL) in text
    assert info.value.searched == [str(tmp_path)]
    with pytest.raises(LocateError, match="dump path does not exist"):
        find_step_dirs(str(tmp_path / "nope"), TRAIN)


# --------------------------------------------------------------------------- whole run


def test_locate_run_end_to_end_from_env(tmp_path):
    graphs = tmp_path / "graphs" / "pid_777_deviceid_0"
    write_graph(graphs, 1, "stale_graph", TRAIN_OPS, mtime=BEGIN - 100)
    init = write_graph(graphs, 2, INIT, INIT_OPS, mtime=BEGIN + 3)
    train = write_graph(graphs, 5, TRAIN, TRAIN_OPS, mtime=BEGIN + 5)
    write_graph(graphs, 11, EVAL, EVAL_OPS, mtime=BEGIN + 60)
    dump = tmp_path / "dump"
    make_steps(dump, time_dir(BEGIN - 100), 0, TRAIN, [0], mtime=BEGIN - 100)
    fresh = time_dir(BEGIN + 4)
    make_steps(dump, fresh, 0, TRAIN, [1, 0])
    make_steps(dump, fresh, 0, INIT, [0])
    run = locate_run(str(dump), since=BEGIN, environ={"DUMP_GRAPH_PATH": str(tmp_path / "graphs")})
    assert isinstance(run, LocatedRun)
    assert run.graph_file == train and run.graph_name == TRAIN
    assert run.dump_path == str(dump)
    assert [(s.time_dir, s.step) for s in run.steps] == [(fresh, "0"), (fresh, "1")]
    assert run.graph_choice["method"] == "training_ops"
    assert init in [c["file"] for c in run.graph_choice["candidates"]]
    assert run.warnings == []


def test_locate_run_multi_card_picks_the_device_asked_for(tmp_path):
    graphs, dump = tmp_path / "graphs", tmp_path / "dump"
    names = {0: "ge_default_20261129083005_1", 1: "ge_default_20261129083006_1"}
    for dev, skew in ((0, 1), (1, 3)):
        write_graph(graphs / "pid_{}_deviceid_{}".format(100 + dev, dev), 5, names[dev], TRAIN_OPS)
        make_steps(dump, time_dir(BEGIN + skew), dev, names[dev], [0])
    with pytest.raises(AmbiguousGraphError) as info:
        locate_run(str(dump), graph_dirs=[str(graphs)], since=BEGIN)
    assert "pass device_id=" in str(info.value)
    run = locate_run(str(dump), graph_dirs=[str(graphs)], since=BEGIN, device_id=1)
    assert run.graph_name == names[1]
    assert [(s.time_dir, s.device_id, s.model_name) for s in run.steps] == [(time_dir(BEGIN + 3), "1", names[1])]


def test_locate_run_without_graphs_says_where_it_looked(tmp_path):
    write_graph(tmp_path / "g", 1, TRAIN, TRAIN_OPS, mtime=BEGIN - 10)
    with pytest.raises(LocateError) as info:
        locate_run(str(tmp_path / "dump"), graph_dirs=[str(tmp_path / "g")], since=BEGIN)
    assert "no Build graph file (ge_proto_*_Build.txt) modified at or after 2026-11-29T08:30:00 in: {}".format(
        tmp_path / "g") in str(info.value)


# --------------------------------------------------------------------------- symlinks are never followed


CHAIN_LEVELS = ["time", "device", "model", "model_id", "step"]


@pytest.mark.parametrize("level", CHAIN_LEVELS)
def test_symlinked_folder_on_the_dump_chain_is_skipped_with_a_warning(tmp_path, level):
    # A link anywhere on {time}/{device}/{model}/{model_id}/{step} (e.g. `ln -s /etc <step>`)
    # would pull an outside tree into the bundle: it is never followed, and it is reported.
    dump, outside = tmp_path / "dump", tmp_path / "outside"
    fresh = time_dir(BEGIN + 2)
    make_steps(dump, fresh, 0, TRAIN, [0])  # the real run, kept
    make_steps(outside, fresh, 1, TRAIN, [0])  # an outside tree with the same shape
    real = [fresh, "1", TRAIN, "1", "0"]
    depth = CHAIN_LEVELS.index(level) + 1
    linked = [time_dir(BEGIN + 5) if level == "time" else fresh, "1", TRAIN, "1", "7"][:depth]
    parent = os.path.join(str(dump), *linked[:-1])
    os.makedirs(parent, exist_ok=True)
    link = os.path.join(parent, linked[-1])
    os.symlink(os.path.join(str(outside), *real[:depth]), link)
    notes = []
    steps = find_step_dirs(str(dump), TRAIN, since=BEGIN, warnings=notes)
    assert [(s.time_dir, s.device_id, s.step) for s in steps] == [(fresh, "0", "0")]
    assert not any(str(outside) in s.path or s.path.startswith(link) for s in steps)
    linked_notes = [n for n in notes if "symlink" in n]
    assert len(linked_notes) == 1 and link in linked_notes[0] and "never followed" in linked_notes[0]


def test_only_a_symlinked_step_is_an_error_naming_the_link(tmp_path):
    dump = tmp_path / "dump"
    make_steps(dump, "20240101120000", 0, TRAIN, [0])
    step = os.path.join(str(dump), "20240101120000", "0", TRAIN, "1", "0")
    for name in os.listdir(step):
        os.unlink(os.path.join(step, name))
    os.rmdir(step)
    os.symlink("/etc", step)
    notes = []
    with pytest.raises(LocateError) as info:
        find_step_dirs(str(dump), TRAIN, warnings=notes)
    assert "symlinked folders not followed: {}".format(step) in str(info.value)
    assert any(step in n and "/etc" in n for n in notes)


def test_symlinked_dump_path_itself_is_taken(tmp_path):
    # The folder the user names may be a link (/home/output -> /data/output); below it, none is.
    make_steps(tmp_path / "real", time_dir(BEGIN + 2), 0, TRAIN, [0])
    os.symlink(str(tmp_path / "real"), str(tmp_path / "named"))
    notes = []
    assert [s.step for s in find_step_dirs(str(tmp_path / "named"), TRAIN, since=BEGIN, warnings=notes)] == ["0"]
    assert notes == []


def test_graph_search_skips_symlinked_subfolders_and_graph_files(tmp_path):
    graphs, outside = tmp_path / "graphs", tmp_path / "outside"
    own = write_graph(graphs, 5, TRAIN, TRAIN_OPS, mtime=BEGIN + 5)
    far = write_graph(outside / "pid_9_deviceid_0", 6, EVAL, TRAIN_OPS, mtime=BEGIN + 6)
    os.symlink(str(outside / "pid_9_deviceid_0"), str(graphs / "pid_9_deviceid_0"))
    os.symlink(far, str(graphs / "ge_proto_00000007_graph_7_Build.txt"))
    notes = []
    assert expand_graph_dir(str(graphs), warnings=notes) == [str(graphs)]
    assert len(notes) == 1 and str(graphs / "pid_9_deviceid_0") in notes[0] and "never followed" in notes[0]
    notes = []
    assert find_build_graphs([str(graphs)], since=BEGIN, warnings=notes) == [own]
    assert len(notes) == 1 and "ge_proto_00000007_graph_7_Build.txt" in notes[0]
    make_steps(tmp_path / "dump", time_dir(BEGIN + 4), 0, TRAIN, [0])
    run = locate_run(str(tmp_path / "dump"), graph_dirs=[str(graphs)], since=BEGIN)
    assert run.graph_file == own
    assert [n for n in run.warnings if "symlinked" in n] and all(far not in c["file"] for c in
                                                                 run.graph_choice["candidates"])
    assert any("pid_9_deviceid_0" in n for n in run.warnings)
    assert graph_search_dirs({"DUMP_GRAPH_PATH": str(graphs)}, warnings=notes) == [str(graphs)]
