"""The run summary a normal TF script shows carries the headline of the checks that need no golden
(issue 23): the NaN/Inf origin of a ``nan`` fault and the first overflow entry of an ``overflow``
fault with enable_dump_debug, named with its original TF op; a finite run adds no notice line.
Real TensorFlow, emulated NPU (ascend profile)."""
import logging
import sys

import npu_dump_hook.compare as compare_package
from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook._cli_conventions import NOTICE
from npu_dump_hook.sample_models import mlp_session

from helpers.runs import clean_env, run

FAULTED = "hidden2/MatMul"

SCRIPT = """
import sys
from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.sample_models import mlp_session
debug = sys.argv[1] == "overflow"
options = DumpOptions(enable_dump_debug=True, dump_path="dump") if debug else \\
    DumpOptions(enable_dump=True, dump_path="dump", dump_data="stats")
hook = NpuDumpHook(options, output_dir="out", backend="emulated", emulate_profile="ascend",
                   faults={"hidden2/MatMul": sys.argv[1]})
mlp_session.train(hook.options, hooks=[hook])
"""


def _notices(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "npu_dump_hook.hook" and r.levelno == logging.INFO]


def _train(options, faults, caplog):
    caplog.set_level(logging.INFO, logger="npu_dump_hook")
    hook = NpuDumpHook(options, output_dir="out", backend="emulated", emulate_profile="ascend", faults=faults)
    mlp_session.train(hook.options, hooks=[hook])
    assert hook.bundle is not None
    return hook, _notices(caplog)


def test_nan_fault_the_summary_names_the_origin_not_its_consumers(in_tmp_cwd, caplog):
    options = DumpOptions(enable_dump=True, dump_path="dump", dump_data="stats")
    hook, lines = _train(options, {FAULTED: "nan"}, caplog)
    (headline,) = [line for line in lines if "NaN/Inf origin:" in line]
    assert "NaN/Inf origin: {} (MatMulV2), original ops: {}; propagates to".format(FAULTED, FAULTED) in headline
    assert hook.bundle.location in headline and "npu-dump-hook compare" in headline


def test_overflow_fault_the_summary_names_the_first_overflow_with_its_tf_op(in_tmp_cwd, caplog):
    hook, lines = _train(DumpOptions(enable_dump_debug=True, dump_path="dump"), {FAULTED: "overflow"}, caplog)
    (headline,) = [line for line in lines if "overflow:" in line]
    assert "first: {} (MatMulV2), original ops: {}".format(FAULTED, FAULTED) in headline


def test_a_finite_run_adds_no_notice(in_tmp_cwd, caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="npu_dump_hook")
    reread = []  # the bundle opened again: the headline did not take the writer's listing
    monkeypatch.setattr(compare_package, "load_npu", lambda *args, **kwargs: reread.append(args))
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", backend="emulated")
    mlp_session.train(hook.options, hooks=[hook])
    checked = [r for r in caplog.records if "NaN/Inf" in r.getMessage()]
    assert [r.getMessage() for r in checked] == [
        "npu_dump_hook: NaN/Inf: 0 of {} dumped ops non-finite (tensors)".format(hook.bundle.coverage["dumped"])]
    assert checked[0].levelno == logging.INFO and not getattr(checked[0], NOTICE, False)  # logged, not shown
    assert [r for r in caplog.records if getattr(r, NOTICE, False)][0].getMessage().startswith("npu_dump_hook: bundle ")
    assert reread == [] and hook.bundle.listing is None  # the listing served, then was let go


def test_a_plain_script_shows_the_headline_on_stderr(tmp_path):
    for fault, expected in (("nan", "NaN/Inf origin: {} (MatMulV2)".format(FAULTED)),
                            ("overflow", "first: {} (MatMulV2), original ops: {}".format(FAULTED, FAULTED))):
        (tmp_path / fault).mkdir()
        code, out, err = run([sys.executable, "-c", SCRIPT, fault], tmp_path / fault, clean_env(), timeout=300)
        assert code == 0, err[-3000:]
        assert expected in err and "npu_dump_hook: bundle " in err, err[-3000:]
