"""NPU vs NPU (docs/compare.md, "NPU vs NPU"): two emulated ascend-profile bundles of the sample
CNN; a fault on one side is named across different fusion, and --determinism lists nothing for
two identical runs and names an injected non-deterministic op."""
import inspect

import pytest

from npu_dump_hook import NpuDumpHook
from npu_dump_hook.cli import main
from npu_dump_hook.compare import compare
from npu_dump_hook.errors import OptionError

pytestmark = pytest.mark.skipif("faults" not in inspect.signature(NpuDumpHook).parameters,
                                reason="this emulator has no realistic profile / faults")


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    from npu_dump_hook.sample_models import cnn_estimator

    root = tmp_path_factory.mktemp("pair")
    made = {}
    for name, faults in (("a", None), ("a2", None), ("conv", {"conv2/Conv2D": "scale=1.05"}),
                         ("nondet", {"fc1/MatMul": "nondeterministic=1e-4"}), ("nondet2", {"fc1/MatMul":
                                                                                            "nondeterministic=1e-4"})):
        hook = NpuDumpHook(output_dir=str(root / name), backend="emulated", emulate_profile="ascend", faults=faults)
        cnn_estimator.train(str(root / ("model_" + name)), hooks=[hook], steps=1000)
        made[name] = hook.bundle.location
    return made


def test_a_fault_on_one_side_is_named_across_different_fusion(bundles):
    """The fault on conv2/Conv2D keeps it out of the fused Conv2D+BiasAdd+Relu node on that side."""
    result = compare(bundles["a"], bundles["conv"], workers=1)  # A fused, B not: A's fused row meets B's Relu
    first = result.doc["first_divergence"]
    assert result.exit_code == 1 and result.doc["golden"]["kind"] == "npu", result.summary_text()
    assert first["original_ops"] == ["conv2/Conv2D", "conv2/BiasAdd", "conv2/Relu"], result.summary_text()
    assert result.doc["root_causes"] == [first["row"]] and not result.doc["summary"]["incomplete"]

    back = compare(bundles["conv"], bundles["a"], workers=1)  # its unfused Conv2D/BiasAdd have no counterpart
    rows = back.doc["rows"]
    assert not back.doc["summary"]["incomplete"], back.summary_text()
    assert any(r["npu_op"] == "conv2/Conv2D" and r["status"] == "not_compared" for r in rows)
    assert rows[back.doc["first_divergence"]["row"]]["ground_truth"] == ["conv2/Relu"], back.summary_text()


def test_two_healthy_runs_agree_and_determinism_lists_nothing(bundles, capsys):
    same = compare(bundles["a"], bundles["a2"], workers=1)
    assert same.exit_code == 0 and same.doc["summary"]["breached"] == 0, same.summary_text()
    result = compare(bundles["a"], bundles["a2"], workers=1, determinism=True)
    assert result.doc["determinism"] == {"ops": [], "rows": [], "first": None}, result.summary_text()
    assert result.exit_code == 0
    assert main(["compare", bundles["a"], bundles["a2"], "--determinism", "--workers", "1"]) == 0
    assert "determinism: 0 op(s)" in capsys.readouterr().out


def test_determinism_names_a_non_deterministic_op(bundles):
    result = compare(bundles["nondet"], bundles["nondet2"], workers=1, determinism=True)
    found = result.doc["determinism"]
    assert found["first"] == "fc1/MatMul" and found["ops"][0] == "fc1/MatMul", result.summary_text()
    assert result.exit_code == 1 and result.doc["first_divergence"]["npu_op"] == "fc1/MatMul"
    orders = [result.doc["rows"][n]["order"] for n in found["rows"]]
    assert orders == sorted(orders)  # execution order
    assert "conv2/Conv2Dconv2/Relu" not in found["ops"]  # what ran before it is bit for bit the same


def test_determinism_needs_two_npu_bundles(tmp_path):
    with pytest.raises(OptionError, match="determinism"):
        compare(str(tmp_path), str(tmp_path), determinism=True)


def _packed(bundle, dest, mode):
    """``bundle`` packed as a tar archive ``dest`` (its folder at the archive's top)."""
    import os
    import tarfile

    with tarfile.open(str(dest), mode) as tar:
        tar.add(bundle, arcname=os.path.basename(bundle))
    return str(dest)


@pytest.mark.parametrize("side", ["a", "b", "both"])
def test_an_archive_is_either_side(bundles, tmp_path, side):
    """``compare NPU_A NPU_B`` with a .tar/.tar.gz bundle on either side runs NPU vs NPU, as with folders."""
    a = _packed(bundles["a"], tmp_path / "a.tar.gz", "w:gz") if side in ("a", "both") else bundles["a"]
    b = _packed(bundles["conv"], tmp_path / "conv.tar", "w") if side in ("b", "both") else bundles["conv"]
    result = compare(a, b, workers=1)
    assert result.doc["golden"]["kind"] == "npu", result.summary_text()
    assert result.exit_code == 1 and not result.doc["summary"]["incomplete"], result.summary_text()
    assert result.doc["first_divergence"]["original_ops"] == ["conv2/Conv2D", "conv2/BiasAdd", "conv2/Relu"]


def test_determinism_with_an_archive_side(bundles, tmp_path, capsys):
    archive = _packed(bundles["a2"], tmp_path / "a2.tar.gz", "w:gz")
    assert main(["compare", bundles["a"], archive, "--determinism", "--workers", "1"]) == 0
    assert "determinism: 0 op(s)" in capsys.readouterr().out
    assert main(["compare", _packed(bundles["nondet"], tmp_path / "n.tar", "w"), bundles["nondet2"],
                 "--determinism", "--workers", "1"]) == 1
