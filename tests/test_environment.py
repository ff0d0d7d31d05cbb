"""run.environment: what a run ran on is recorded in its bundle, checked by verify, and
compare prints what differs between its two sides before any metric (a changed
precision_mode first of all)."""
import json
import os
import sys

import pytest

from npu_dump_hook import NpuDumpHook, environment
from npu_dump_hook.bundle.schema import environment_problems
from npu_dump_hook.compare import compare


def test_capture_records_versions_packages_variables_and_session(tmp_path):
    switch = tmp_path / "fusion_switch.cfg"
    switch.write_text('{"Switch": {"GraphFusion": {"ALL": "off"}}}')
    from npu_dump_hook import _tf

    config = _tf.config_pb2().ConfigProto()
    custom = config.graph_options.rewrite_options.custom_optimizers.add(name="NpuOptimizer")
    custom.parameter_map["precision_mode"].s = b"allow_mix_precision"
    custom.parameter_map["fusion_switch_file"].s = str(switch).encode()
    custom.parameter_map["deterministic"].i = 1
    env = {"ASCEND_GLOBAL_LOG_LEVEL": "3", "HCCL_CONNECT_TIMEOUT": "600", "TF_CPP_MIN_LOG_LEVEL": "2",
           "DUMP_GE_GRAPH": "2", "NPU_DUMP_PATH": "/d", "HOME": "/root", "PATH": "/bin"}
    hidden = {"TF_VAR_db_password": "x", "TF_CLI_CONFIG_FILE": "/c"}
    found = environment.capture("1.15.5", config, None, dict(env, ASCEND_AUTH_TOKEN="s3", **hidden))
    assert found["env"].pop("ASCEND_AUTH_TOKEN") == environment.REDACTED
    assert found["session"]["precision_mode"] == "allow_mix_precision"
    assert found["session"]["deterministic"] == 1 and found["session"]["fusion_switch_file"] == str(switch)
    assert len(found["session"]["fusion_switch_sha256"]) == 64
    assert found["env"] == {k: v for k, v in env.items() if k not in ("HOME", "PATH")}
    assert found["versions"]["tensorflow"] == "1.15.5" and found["versions"]["numpy"]
    assert found["packages"]["count"] > 10 and len(found["packages"]["sha256"]) == 64
    assert environment_problems(found) == []
    assert environment_problems({"versions": [], "env": {}}) and environment_problems("x")


def test_differences_name_what_changed():
    base = environment.capture("2.15.1", None, {"numerics": {"precision_mode": "allow_fp32_to_fp16"}}, {})
    other = json.loads(json.dumps(base))
    other["session"]["precision_mode"] = "force_fp32"
    other["env"]["ASCEND_OPP_PATH"] = "/opt/opp"
    lines = environment.differences({"run": {"environment": base}}, {"run": {"environment": other}})
    assert lines == ["session.precision_mode: NPU allow_fp32_to_fp16, golden force_fp32",
                     "env.ASCEND_OPP_PATH: NPU (none), golden /opt/opp"]
    assert environment.differences(base, base) == [] and environment.differences(base, {"run": {}}) == []


def test_differences_leave_out_the_variables_that_name_the_runs_role():
    npu = environment.capture("2.15.1", None, None, {"NPU_DUMP_HOOK_BACKEND": "emulated",
                                                   "NPU_DUMP_HOOK_OUTPUT_DIR": "/tmp/npu",
                                                   "NPU_DUMP_HOOK_FAULTS": "conv=scale=1.05",
                                                   "NPU_DUMP_HOOK_FLAGS": "NPU_DUMP_HOOK_BACKEND NPU_DUMP_HOOK_FAULTS"})
    golden = environment.capture("2.15.1", None, None, {"NPU_DUMP_HOOK_INITIAL_STATE": "/tmp/npu/bundles/b",
                                                      "NPU_DUMP_HOOK_OUTPUT_DIR": "/tmp/golden",
                                                      "NPU_DUMP_HOOK_FLAGS": "NPU_DUMP_HOOK_INITIAL_STATE"})
    assert environment.differences(npu, golden) == ["env.NPU_DUMP_HOOK_FAULTS: NPU conv=scale=1.05, golden (none)"]
    assert "NPU_DUMP_HOOK_OUTPUT_DIR" in npu["env"]  # still recorded


def test_bundles_record_it_and_compare_prints_the_changed_precision_mode(in_tmp_cwd):
    from npu_dump_hook.sample_models import mlp_session

    npu = NpuDumpHook(output_dir=str(in_tmp_cwd / "npu"), backend="emulated", emulate_profile="ascend")
    mlp_session.train(npu.options, hooks=[npu], steps=1000)
    golden = NpuDumpHook(output_dir=str(in_tmp_cwd / "golden"), initial_state=npu.bundle.location)
    mlp_session.train(golden.options, hooks=[golden], steps=1000)
    with open(os.path.join(npu.bundle.location, "data", "bundle.json")) as handle:
        recorded = json.load(handle)["run"]["environment"]
    assert recorded["session"]["precision_mode"] == "allow_fp32_to_fp16" and environment_problems(recorded) == []
    result = compare(npu.bundle.location, golden.bundle.location, workers=1)
    expected = "session.precision_mode: NPU allow_fp32_to_fp16, golden (none)"
    assert expected in result.doc["environment_differences"]
    text = result.summary_text()
    assert text.index(expected) < text.index("verdict:"), text


@pytest.mark.parametrize("broken", [{"versions": {"x": [1]}, "packages": None, "env": {}, "session": {}},
                                    {"versions": {}, "packages": {"count": "3"}, "env": {}, "session": {}}])
def test_a_malformed_environment_is_a_verify_problem(broken):
    assert environment_problems(broken)


def test_post_hoc_collect_bundles_record_the_collecting_environment(in_tmp_cwd, monkeypatch, capsys):
    """`collect` (no hook in the run) records run.environment too: its own versions, TensorFlow's as
    installed (collect never imports it), its variables, no session options; ``recorded_by: collect``."""
    from npu_dump_hook import _tf
    from npu_dump_hook.bundle import read_bundle, verify_bundle
    from npu_dump_hook.cli import main
    from npu_dump_hook.options import DumpOptions
    from npu_dump_hook.sample_models import mlp_session

    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", collect=False)
    mlp_session.train(hook.options, hooks=[hook])
    graph_dir = os.path.dirname(hook.summary["emulator"]["graph_file"])
    monkeypatch.setenv("ASCEND_OPP_PATH", "/opt/opp")
    monkeypatch.setenv("HCCL_SECRET_KEY", "s3")
    assert main(["collect", "--dump-path", "dump", "--graph-dir", graph_dir, "--out", "bundle",
                 "--since", str(int(hook.started))]) == 0, capsys.readouterr().err
    found = read_bundle("bundle")["run"]["environment"]
    assert found["recorded_by"] == environment.RECORDED_BY_COLLECT and environment_problems(found) == []
    assert found["versions"]["tensorflow"] == _tf.tf_version() and found["versions"]["numpy"]
    assert found["env"]["ASCEND_OPP_PATH"] == "/opt/opp" and found["env"]["HCCL_SECRET_KEY"] == environment.REDACTED
    assert set(found["session"].values()) == {None} and found["packages"]["count"] > 10
    assert not verify_bundle("bundle")
    changed = json.loads(json.dumps(found))
    changed["env"]["ASCEND_OPP_PATH"] = "/opt/other"
    assert environment.differences({"run": {"environment": found}}, changed) == [
        "env.ASCEND_OPP_PATH: NPU /opt/opp, golden /opt/other"]


_METADATA_CASES = {
    "plain": "Metadata-Version: 2.1\nName: Plain_Pkg\nVersion: 1.0\n\nName: not-this\nVersion: 9\n",
    "folded": "Metadata-Version: 2.1\nName: folded\n  -name\nVersion: 2.0\n\nbody\n",
    "crlf": "Metadata-Version: 2.1\r\nName: Crlf\r\nVersion: 3.0\r\n\r\nName: not-this\r\n",
    "no-body": "Metadata-Version: 2.1\nName: nobody\nVersion: 4.0\n",
    "no-version": "Metadata-Version: 2.1\nName: noversion\n\nVersion: 5\n",
}


@pytest.mark.parametrize("case", sorted(_METADATA_CASES))
def test_installed_names_are_read_from_the_header_as_importlib_reads_them(tmp_path, case):
    metadata = pytest.importorskip("importlib.metadata")  # Python 3.8+; 3.7 reads pkg_resources
    info = tmp_path / "pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_bytes(_METADATA_CASES[case].encode())
    distribution = metadata.PathDistribution(info)
    expected = "{}=={}".format((distribution.metadata["Name"] or "").lower(), distribution.version)
    assert environment._name_version(distribution) == expected
    assert "not-this" not in expected and "9" not in expected.split("==")[1]


def test_the_installed_distributions_read_as_importlib_reads_them():
    metadata = pytest.importorskip("importlib.metadata")
    expected = sorted({"{}=={}".format((d.metadata["Name"] or "").lower(), d.version)
                       for d in metadata.distributions()})
    assert environment._distributions() == expected and len(expected) > 10


def _working_set(entries):
    """pkg_resources' listing of sys.path ``entries`` (Python 3.7's source of the packages)."""
    pkg_resources = pytest.importorskip("pkg_resources")
    return sorted({"{}=={}".format(d.project_name.lower(), d.version) for d in pkg_resources.WorkingSet(entries)})


def test_the_installed_distributions_read_as_pkg_resources_reads_them(monkeypatch):
    """Python 3.7 lists the installed distributions from the metadata folders, as pkg_resources
    (0.1 s to import) does, from this sys.path."""
    expected = _working_set(None)
    assert environment._metadata_folders_listing() == expected and len(expected) > 10
    if sys.version_info < (3, 8):  # the listing Python 3.7 records, without importing pkg_resources
        monkeypatch.delitem(sys.modules, "pkg_resources")
        assert environment._distributions() == expected and "pkg_resources" not in sys.modules


_ENTRIES = {  # name in a sys.path folder: {file: text} (a folder), a text (a file), None (empty folder)
    "plain_name-1.2.3.dist-info": {"METADATA": "Name: plain-name\nVersion: 9\n"},
    "No.Version.dist-info": {"METADATA": "Name: x\n  Version: 2.0.post1\n"},
    "empty-1.0.dist-info": None,
    "egg_dir-0.1-py3.7.egg-info": {"PKG-INFO": "Name: egg\nVersion: 0.2rc1\n"},
    "egg_file-3.0.egg-info": "Metadata-Version: 1.0\nName: egg-file\n",
    "egg_without-4.0+local.1.egg-info": {"SOURCES.txt": "x\n"},
    "not_metadata-1.0.txt": "x",
}


def _folder(path, entries):
    for name, content in entries.items():
        if isinstance(content, str):
            (path / name).write_text(content)
        else:
            (path / name).mkdir()
            for file_name, text in (content or {}).items():
                (path / name / file_name).write_text(text)


def test_metadata_entries_read_as_pkg_resources_reads_them(tmp_path):
    _folder(tmp_path, _ENTRIES)
    expected = _working_set([str(tmp_path)])
    assert len(expected) == 5 and "empty==1.0" not in expected
    found = environment._folder_distributions(str(tmp_path))
    assert sorted("{}=={}".format(k, v) for k, v in found.items()) == expected


@pytest.mark.parametrize("odd", [{"odd-1.0.dist-info": {"METADATA": ""}, "Odd-2.0.dist-info": {"METADATA": ""}},
                                 {"padded-01.0.dist-info": {"METADATA": ""}},
                                 {"-1.0.dist-info": {"METADATA": ""}},
                                 {"unversioned.dist-info": {"METADATA": "Name: u\n"}}])
def test_what_pkg_resources_reads_otherwise_is_left_to_it(tmp_path, odd):
    """A name twice in a folder (pkg_resources keeps the newest), a version it would rewrite, no
    name, no version: not read here."""
    _folder(tmp_path, odd)
    assert environment._folder_distributions(str(tmp_path)) is None
