"""Collection at the end of a hooked run, end to end with real TF and the emulated backend."""
import json
import logging
import os
import subprocess
import sys

import bagit
import pytest

from npu_dump_hook import DumpOptions, LocateError, NpuDumpHook, OptionError
from npu_dump_hook.bundle import read_bundle, read_index, verify_bundle
from npu_dump_hook.cli import main
from npu_dump_hook.sample_models import cnn_estimator, mlp_session

from helpers.graphs import run_long_named_graph

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def assert_valid_bundle(path):
    assert verify_bundle(path) == []
    bagit.Bag(path).validate()  # the outside check: PyPI's BagIt validator


def test_estimator_run_ends_with_a_valid_bundle(in_tmp_cwd):
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out")
    cnn_estimator.train(str(in_tmp_cwd / "model"), hooks=[hook], steps=1000)
    bundle = hook.bundle.path
    assert bundle == os.path.join(str(in_tmp_cwd), "out", "bundles", os.path.basename(hook.run_dir))
    assert_valid_bundle(bundle)
    doc = read_bundle(bundle)
    assert doc["schema"] == "npu_dump_hook/bundle@1" and doc["backend"] == "emulated"
    assert doc["graph"]["name"] == hook.summary["emulator"]["graph_name"]
    assert doc["dump"]["model_name"] == hook.summary["emulator"]["graph_name"] and doc["dump"]["steps"] == ["0"]
    assert doc["run"]["steps"] == 1 and doc["randomness"]["policy"] == "strip"
    kinds = {f["kind"] for f in doc["files"]}
    assert {"dump", "graph", "tf_graph", "golden", "init"} <= kinds
    dumps = [f for f in doc["files"] if f["kind"] == "dump"]
    assert all(f["sha256"] and f["op_name"] for f in dumps)
    assert doc["coverage"]["dumped"] == len({f["op_name"] for f in dumps})


def test_session_run_bundle_passes_bagit_cli(in_tmp_cwd):
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", archive="tar.gz")
    mlp_session.train(hook.options, hooks=[hook])
    assert_valid_bundle(hook.bundle.path)
    assert verify_bundle(hook.bundle.archive) == []
    out = subprocess.run([sys.executable, "-m", "bagit", "--validate", hook.bundle.path],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    assert out.returncode == 0, out.stdout
    assert main(["verify", hook.bundle.path]) == 0


def test_collection_failure_is_raised_when_strict(in_tmp_cwd, monkeypatch):
    from npu_dump_hook import collect

    def nothing_found(*args, **kwargs):
        raise LocateError("no dump folder for this run (test)")

    monkeypatch.setattr(collect, "locate_run", nothing_found)
    options = DumpOptions(enable_dump=True, dump_path="dump")
    hook = NpuDumpHook(options, output_dir="out")
    with pytest.raises(LocateError, match="dump"):
        mlp_session.train(options, hooks=[hook])
    assert hook.bundle is None
    # the failed run's DUMP_GRAPH_PATH is unset: the process's next run gets its own graph folder
    assert os.environ.get("DUMP_GRAPH_PATH") != hook.layout.graph_dir


def test_dump_layer_naming_no_op_fails_before_training(in_tmp_cwd):
    # Once: the emulator (like GE) wrote no dump folder, and collection failed after training.
    options = DumpOptions(enable_dump=True, dump_path="dump", dump_layer="hidden1/MatMul no/such/op")
    hook = NpuDumpHook(options, output_dir="out")
    with pytest.raises(OptionError, match="names op.s. that are not in the graph: no/such/op"):
        mlp_session.train(options, hooks=[hook])
    assert hook._steps_run == 0
    assert os.environ.get("DUMP_GRAPH_PATH") != hook.layout.graph_dir  # unset after the failed begin()


def test_dump_step_list_runs_enough_steps_and_dumps_each(in_tmp_cwd):
    options = DumpOptions(enable_dump=True, dump_path="dump", dump_step="0|2|4")
    hook = NpuDumpHook(options, output_dir="out")
    losses = mlp_session.train(options, hooks=[hook])
    assert len(losses) == 5 and hook.max_steps == 5
    assert hook.bundle.steps == ["0", "2", "4"]
    with pytest.raises(OptionError, match="dump_step='0\\|5' selects step 5, but max_steps=2"):
        NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump", dump_step="0|5"), output_dir="out", max_steps=2)


def test_the_summary_line_is_an_info_notice_a_plain_script_shows_on_stderr(in_tmp_cwd, caplog, capsys):
    # Issue 21 point 9: it was a WARNING ("npu-dump-hook: warning: bundle ..." under the runner).
    # Now: INFO, and on stderr once when logging would not show INFO (here: root at WARNING).
    options = DumpOptions(enable_dump=True, dump_path="dump")
    plain = NpuDumpHook(options, output_dir="plain")
    mlp_session.train(options, hooks=[plain])
    shown = [l for l in capsys.readouterr().err.splitlines() if l.startswith("npu_dump_hook: bundle ")]
    assert len(shown) == 1 and plain.bundle.location in shown[0]
    hook = NpuDumpHook(options, output_dir="out")
    with caplog.at_level(logging.INFO, logger="npu_dump_hook"):
        mlp_session.train(options, hooks=[hook])
    lines = [r for r in caplog.records if r.getMessage().startswith("npu_dump_hook: bundle ")]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    assert "npu_dump_hook: bundle " not in capsys.readouterr().err  # logging showed it: not twice
    assert hook.bundle.location in lines[0].getMessage() and "1 training step(s)" in lines[0].getMessage()
    quiet = NpuDumpHook(options, output_dir="out2", verbose=False)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="npu_dump_hook"):
        mlp_session.train(options, hooks=[quiet])
    (line,) = [r for r in caplog.records if r.getMessage().startswith("npu_dump_hook: bundle ")]
    assert line.levelno == logging.INFO
    caplog.clear()
    mlp_session.train(options, hooks=[NpuDumpHook(options, output_dir="out3", verbose=False)])
    assert "npu_dump_hook: bundle " not in capsys.readouterr().err


def test_unusable_output_and_bundle_dirs_fail_at_construction(in_tmp_cwd):
    (in_tmp_cwd / "taken").write_text("a file, not a folder")
    with pytest.raises(OptionError) as info:
        NpuDumpHook(DumpOptions(), output_dir="taken")
    assert info.value.option == "output_dir"
    with pytest.raises(OptionError) as info:
        NpuDumpHook(DumpOptions(), output_dir="out", bundle_dir="taken/bundles")
    assert info.value.option == "bundle_dir"


def test_collection_failure_is_logged_when_not_strict(in_tmp_cwd, caplog, monkeypatch):
    from npu_dump_hook import collect

    def nothing_found(*args, **kwargs):
        raise LocateError("no dump folder for this run (test)")

    monkeypatch.setattr(collect, "locate_run", nothing_found)
    options = DumpOptions(enable_dump=True, dump_path="dump")
    hook = NpuDumpHook(options, output_dir="out", strict=False)
    with caplog.at_level(logging.ERROR, logger="npu_dump_hook.hook"):
        losses = mlp_session.train(options, hooks=[hook])
    assert len(losses) == 1 and hook.bundle is None
    assert "collecting the bundle into" in caplog.text and "strict=False: training continues" in caplog.text
    assert [f["doing"] for f in hook.failures] == ["collecting the bundle into {}".format(hook.bundle_dir)]


def test_overflow_run_without_overflow_is_not_an_error(in_tmp_cwd):
    options = DumpOptions(enable_dump_debug=True, dump_path="dump")
    hook = NpuDumpHook(options, output_dir="out")
    mlp_session.train(options, hooks=[hook])
    assert hook.bundle is None


def test_rank_not_in_ranks_does_not_dump(in_tmp_cwd, monkeypatch):
    monkeypatch.setenv("RANK_ID", "1")
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", ranks=[0])
    losses = mlp_session.train(hook.options, hooks=[hook])
    assert len(losses) == 1 and hook.summary["steps"] == 1
    assert hook.bundle is None and hook.summary["backend"] == "none"
    assert os.listdir(str(in_tmp_cwd / "dump")) == []


RANK_SCRIPT = """
import sys
from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.sample_models import mlp_session
hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path=sys.argv[1]), output_dir=sys.argv[2],
                   bundle_dir=sys.argv[3])
mlp_session.train(hook.options, hooks=[hook])
print(hook.bundle.path)
"""


def test_four_ranks_share_one_bundle_root(in_tmp_cwd):
    root = str(in_tmp_cwd / "bundles")
    procs = []
    for rank in range(4):
        env = dict(os.environ, RANK_ID=str(rank), DEVICE_ID=str(rank), TF_CPP_MIN_LOG_LEVEL="2")
        env.pop("DUMP_GRAPH_PATH", None)
        procs.append(subprocess.Popen(
            [sys.executable, "-c", RANK_SCRIPT, str(in_tmp_cwd / "dump"), str(in_tmp_cwd / "out"), root],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True))
    paths = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        paths.append(out.strip().splitlines()[-1])
    assert [os.path.dirname(p) for p in paths] == [os.path.join(root, "rank_{}".format(r)) for r in range(4)]
    for rank, path in enumerate(paths):
        assert_valid_bundle(path)
        doc = read_bundle(path)
        assert doc["run"]["rank"] == rank and doc["dump"]["device_id"] == str(rank)
        assert os.path.basename(path).endswith("_rank{}".format(rank))  # the run folder's name
    index = read_index(root)
    assert sorted(int(r) for r in index["ranks"]) == [0, 1, 2, 3]
    assert [index["ranks"][str(r)]["path"] for r in range(4)] == [os.path.relpath(p, root) for p in paths]
    assert sorted(os.listdir(root)) == ["index.json", "rank_0", "rank_1", "rank_2", "rank_3"]  # no lock file left


def test_a_second_run_with_rank_id_gets_its_own_bundle(in_tmp_cwd, monkeypatch):
    # Once: the second run of the same script crashed at the end with BundleExistsError.
    monkeypatch.setenv("RANK_ID", "0")
    locations = []
    for _ in range(2):
        options = DumpOptions(enable_dump=True, dump_path="dump")
        hook = NpuDumpHook(options, output_dir="out")
        mlp_session.train(options, hooks=[hook])
        locations.append(hook.bundle.path)
        import time

        time.sleep(1.1)  # run folders are named to the second
    assert locations[0] != locations[1] and all(os.path.isdir(p) for p in locations)
    index = read_index(os.path.join(str(in_tmp_cwd), "out", "bundles"))
    assert index["ranks"]["0"]["path"] == os.path.relpath(locations[1], os.path.join(str(in_tmp_cwd), "out", "bundles"))


def test_post_hoc_collect_command(in_tmp_cwd, capsys):
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", collect=False)
    mlp_session.train(hook.options, hooks=[hook])
    graph_dir = os.path.dirname(hook.summary["emulator"]["graph_file"])
    code = main(["collect", "--dump-path", "dump", "--graph-dir", graph_dir, "--out", "bundle",
                 "--since", str(int(hook.started))])
    assert code == 0, capsys.readouterr().err
    assert_valid_bundle(str(in_tmp_cwd / "bundle"))
    capsys.readouterr()
    assert main(["inspect", "bundle", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["backend"] == "emulated" and doc["verification"] == {"ok": True, "problems": []}
    assert doc["graph"]["name"] == hook.summary["emulator"]["graph_name"]


def test_ffts_and_long_names_survive_bundling(in_tmp_cwd):
    from npu_dump_hook.emulator.backend import EmulatedNpu

    long_scope = "a_really_long_name_scope_" * 12
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out",
                       backend=EmulatedNpu(ffts_names=True), reference=False)
    run_long_named_graph(hook, long_scope)
    assert_valid_bundle(hook.bundle.path)
    doc = read_bundle(hook.bundle.path)
    kinds = [f["kind"] for f in doc["files"]]
    assert "mapping" in kinds
    dumps = [f for f in doc["files"] if f["kind"] == "dump"]
    hashed = [f for f in dumps if os.path.basename(f["path"]).isdigit()]
    assert hashed and all(f["op_name"] for f in hashed)
    assert any(f["op_name"].endswith("_product") for f in hashed)
    # The optimizer update (ResourceApplyGradientDescent on TF 2, ApplyGradientDescent on TF 1.15)
    # has its dump file too (the emulator dumps in-place updates since 6aafb36): nothing is missing.
    assert doc["coverage"]["missing"] == []
    assert any(f["op_type"].endswith("ApplyGradientDescent") for f in dumps)


def test_collect_never_follows_a_symlinked_step_folder_out_of_the_tree(tmp_path, capsys):
    # Reproduction: `ln -s /etc <step>` in {time}/{device}/{model}/{model_id}/{step}: collect
    # --link copy exited 0 with /etc's files in the bundle, and verify passed.
    import shutil

    from helpers.bundles import make_run

    run = make_run(tmp_path / "src")
    step = run.steps[0].path
    shutil.rmtree(step)
    os.symlink("/etc", step)
    code = main(["collect", "--dump-path", str(tmp_path / "src" / "dump"), "--graph-dir",
                 str(tmp_path / "src" / "graphs"), "--out", str(tmp_path / "b"), "--link", "copy"])
    err = capsys.readouterr().err
    assert code == 3 and not os.path.exists(str(tmp_path / "b"))
    assert "symlinked folder {} -> /etc".format(step) in err
    assert "symlinked folders not followed: {}".format(step) in err


def test_collect_run_passes_the_records_device_id_to_the_index(tmp_path, monkeypatch):
    # Before: every rank bundle the hook wrote had "device_id": null in index.json.
    import types

    from npu_dump_hook import collect
    from helpers.bundles import make_run

    located = make_run(tmp_path / "src", device="0")  # the chain says 0; the record knows better
    monkeypatch.setattr(collect, "locate_run", lambda *a, **k: located)
    options = types.SimpleNamespace(enabled=True, dump_path=str(tmp_path / "src" / "dump"), enable_dump_debug=False,
                                    as_dict=lambda: {})
    record = types.SimpleNamespace(
        options=options, settle=False, graph_dirs=None, started=None, device_id=5, graph_keyword=None,
        tf_op_names=(), backend="emulated", run_section=lambda: {"rank": 2, "device_id": 5}, randomness=None,
        layout=types.SimpleNamespace(tf_graph=None, name="run"), golden_dir=None, init_dir=None, rank=2,
        golden_only=False, fingerprints=None, golden_for=None, warnings=(),
        inputs_dir=None, inputs=None)
    result = collect.collect_run(record, str(tmp_path / "bundles"))
    assert result.path == str(tmp_path / "bundles" / "rank_2" / "run")  # the run's own folder under its rank
    assert read_index(str(tmp_path / "bundles"))["ranks"]["2"]["device_id"] == "5"


def test_collect_of_an_empty_dump_file_warns_and_verify_agrees(tmp_path, capsys):
    # Reproduction: a 0-byte dump file collected with exit 0 into a bundle that never verified.
    from helpers.bundles import RELU, make_run

    run = make_run(tmp_path / "src")
    open(os.path.join(run.steps[0].path, RELU), "wb").close()
    code = main(["collect", "--dump-path", str(tmp_path / "src" / "dump"), "--graph-dir",
                 str(tmp_path / "src" / "graphs"), "--out", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert code == 0 and RELU in err and "header not readable: file too small (0 bytes)" in err
    assert main(["verify", str(tmp_path / "b")]) == 0
    assert_valid_bundle(str(tmp_path / "b"))


def test_two_runs_in_one_process_get_their_own_graph_folders(in_tmp_cwd):
    # The first run's DUMP_GRAPH_PATH used to stay set: the second run wrote its Build graph
    # into the first run's folder and graph selection saw two candidates.
    bundles = []
    for name in ("first", "second"):
        options = DumpOptions(enable_dump=True, dump_path="dump_" + name)
        hook = NpuDumpHook(options, output_dir=name)
        mlp_session.train(options, hooks=[hook])
        bundles.append(hook)
        assert "DUMP_GRAPH_PATH" not in os.environ
    assert all(len(os.listdir(h.layout.graph_dir)) == 1 for h in bundles)  # one Build graph each
    assert all(h.bundle is not None for h in bundles)


def test_what_collect_logs_names_paths_from_the_tree_escaped(tmp_path, caplog):
    """Issue #20 item 6: collect's log lines reach the training script's terminal; a path with an
    ESC sequence or a C1 control is logged as visible escapes."""
    import types

    from npu_dump_hook.collect import _log_result, wait_for_settle

    root = tmp_path / "dump\x1b[2J\x9b"
    root.mkdir()
    result = types.SimpleNamespace(location=str(tmp_path / "out\x1b]0;t\x07"), files=1, bytes=1, steps=["0\x9b"],
                                   coverage={}, backend="npu", warnings=[])
    with caplog.at_level(logging.INFO, logger="npu_dump_hook"):
        assert wait_for_settle(str(root), quiet_seconds=5, timeout=0.0, poll=0.01) is False
        _log_result(result)  # the hook's end-of-run bundle line
    messages = [r.getMessage() for r in caplog.records if r.name == "npu_dump_hook.collect"]
    assert any("dump\\x1b[2J\\x9b" in m for m in messages)
    assert any("out\\x1b]0;t\\x07" in m for m in messages)
    assert not any(c in m for m in messages for c in "\x1b\x07\x9b")


def test_golden_run_hint_names_the_api_by_hand_and_the_command_under_the_runner():
    import types

    from npu_dump_hook.train import report

    by_hand = types.SimpleNamespace()
    assert report.golden_run_hint(by_hand, "b/run 1") == "NpuDumpHook(backend='reference', initial_state='b/run 1')"
    runner_made = types.SimpleNamespace(**{report.RERUN_COMMAND: ["-m", "pkg.train", "--lr", "0.1 x"]})
    assert report.golden_run_hint(runner_made, "b/run 1") == (
        "npu-dump-hook run --golden-for 'b/run 1' -- python -m pkg.train --lr '0.1 x'")
