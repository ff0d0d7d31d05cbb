"""npu_dump_hook.runner: unmodified training scripts get exactly one NpuDumpHook.

Every script runs in a fresh interpreter (``python -m npu_dump_hook.runner SCRIPT ARGS``, or the
environment-only sitecustomize), real TensorFlow on the emulated backend.
"""
import json
import os
import signal
import sys

import pytest

from npu_dump_hook import constants, runner
from npu_dump_hook.cli import _exit
from npu_dump_hook.errors import OptionError

from helpers.runs import (ESTIMATOR, HELPERS, INTERACTIVE, MONITORED, PROBE, SESSION, assert_one_training_bundle,
                          clean_env, run)

RUNNER = [sys.executable, "-m", "npu_dump_hook.runner"]


def _runner_env(tmp_path, **extra):
    return clean_env(NPU_DUMP_HOOK_OUTPUT_DIR=str(tmp_path / "out"), **extra)


# -- the three entry points, one bundle each ---------------------------------------------------


def _checkpoints(model_dir):
    if not os.path.isdir(str(model_dir)):
        return []
    return sorted(name for name in os.listdir(str(model_dir)) if name.startswith(("checkpoint", "model.ckpt")))


def test_estimator_script_gets_the_hook_in_train(tmp_path):
    code, lines, err = run(RUNNER + [ESTIMATOR, str(tmp_path / "model")], tmp_path, _runner_env(tmp_path))
    assert code == 0, err[-3000:]
    assert lines[-2] == "trained to step 1"  # Estimator.train(steps=100) stopped after the dumped step
    assert_one_training_bundle(tmp_path / "out", lines)
    # The dump run's step-1 checkpoint went to the run folder (get_variable_value above read it there),
    # not into the script's model_dir, where the next real training would resume from it.
    assert _checkpoints(tmp_path / "model") == []
    run_dirs = [p for p in (tmp_path / "out").iterdir() if (p / "model_dir").is_dir()]
    assert len(run_dirs) == 1 and "model.ckpt-1.index" in _checkpoints(run_dirs[0] / "model_dir")


def test_train_and_evaluate_evaluates_without_the_dump_options(tmp_path):
    """The evaluation train_and_evaluate runs inside train() gets the script's own session config."""
    code, lines, err = run(RUNNER + [ESTIMATOR, str(tmp_path / "model"), "train_and_evaluate"], tmp_path,
                           _runner_env(tmp_path))
    assert code == 0, err[-3000:]
    evals = [line for line in lines if line.startswith("eval ")]
    assert evals and set(evals) == {"eval npu config: enable_dump=False dump_path=-"}, lines
    assert lines[-2] == "trained to step 1"
    assert_one_training_bundle(tmp_path / "out", [line for line in lines if not line.startswith("eval ")])
    assert _checkpoints(tmp_path / "model") == []


def test_estimator_dump_run_resumes_from_the_scripts_checkpoint_and_leaves_it_alone(tmp_path):
    model_dir = tmp_path / "model"
    env = _runner_env(tmp_path, NPU_DUMP_HOOK_KEEP_CHECKPOINTS="1")
    code, lines, err = run(RUNNER + [ESTIMATOR, str(model_dir)], tmp_path, env)
    assert code == 0, err[-3000:]
    kept = _checkpoints(model_dir)
    assert "model.ckpt-1.index" in kept  # asked for: trained in the script's model_dir
    code, lines, err = run(RUNNER + [ESTIMATOR, str(model_dir)], tmp_path, _runner_env(tmp_path))
    assert code == 0, err[-3000:]
    assert lines[-2] == "trained to step 2"  # started from the script's step-1 checkpoint
    assert _checkpoints(model_dir) == kept  # and wrote nothing there


def test_monitored_training_session_script_gets_the_hook(tmp_path):
    code, lines, err = run(RUNNER + [MONITORED], tmp_path, _runner_env(tmp_path))
    assert code == 0, err[-3000:]
    assert lines[-2] == "steps 1"
    assert_one_training_bundle(tmp_path / "out", lines)


def test_plain_session_script_ends_with_status_0_after_the_dumped_step(tmp_path):
    code, lines, err = run(RUNNER + [SESSION], tmp_path, _runner_env(tmp_path))
    assert code == 0, err[-3000:]
    float(lines[1])  # print(sess.run(cost)) ran before training, not counted as the step
    assert len(lines) == 3 and not any(line.startswith("iterations") for line in lines)
    assert_one_training_bundle(tmp_path / "out", lines)


def test_a_session_made_before_its_model_is_hooked_at_its_first_run(tmp_path):
    """InteractiveSession() first, then the model, then init.run() and train_op.run()."""
    code, lines, err = run(RUNNER + [INTERACTIVE], tmp_path, _runner_env(tmp_path))
    assert code == 0, err[-3000:]
    assert len(lines) == 1  # the loop never finished: status 0 after the dumped step
    assert_one_training_bundle(tmp_path / "out", lines, config_printed=False)


def test_a_session_config_with_its_own_dump_options_keeps_them(tmp_path):
    """The guide's own NpuOptimizer config (dump on, dump_path, dump_mode all): the hook dumps as it says."""
    dump_path = str(tmp_path / "guide_dump")
    code, lines, err = run(RUNNER + [SESSION, dump_path], tmp_path, _runner_env(tmp_path, NPU_DUMP_MODE="output"))
    assert code == 0, err[-3000:]
    doc = assert_one_training_bundle(tmp_path / "out", lines)
    assert (doc["options"]["dump_path"], doc["options"]["dump_mode"]) == (dump_path, "all")
    assert "the script's session config sets its own NPU dump options" in err  # NPU_DUMP_MODE lost


def test_environment_only_start_hooks_plain_python(tmp_path):
    """NPU_DUMP_HOOK_RUN=1 with the runner's site folder on PYTHONPATH: ``python train.py`` itself."""
    pythonpath = os.pathsep.join(p for p in (runner.site_dir(), os.environ.get("PYTHONPATH")) if p)
    env = _runner_env(tmp_path, NPU_DUMP_HOOK_RUN="1", PYTHONPATH=pythonpath)
    code, lines, err = run([sys.executable, SESSION], tmp_path, env)
    assert code == 0, err[-3000:]
    assert_one_training_bundle(tmp_path / "out", lines)


def test_a_script_that_uses_the_hook_itself_gets_nothing_injected(tmp_path):
    code, lines, err = run(RUNNER + [os.path.join(HELPERS, "guide_session.py"), "exit", str(tmp_path)], tmp_path,
                           _runner_env(tmp_path))
    assert code == 0, err[-3000:]
    assert "the script uses npu_dump_hook itself" in err
    assert not (tmp_path / "out").exists()  # the runner made no hook of its own
    assert os.listdir(str(tmp_path / "bundles")) == [os.path.basename(lines[-1])]


def test_settings_that_do_not_fit_the_run_stop_it_at_the_injection_point(tmp_path):
    """max_steps too small for dump_step is found when the hook is made: one line, status 2."""
    code, lines, err = run(RUNNER + [SESSION], tmp_path,
                           _runner_env(tmp_path, NPU_DUMP_HOOK_MAX_STEPS="2", NPU_DUMP_STEP="3"))
    assert code == 2 and lines == []
    assert err.endswith("npu-dump-hook: option NPU_DUMP_HOOK_MAX_STEPS='2': dump_step='3' selects step 3, but "
                        "max_steps=2 runs steps 0..1: raise max_steps or leave it unset\n"), err[-2000:]
    assert "Traceback" not in err and "Exception ignored" not in err


# -- the script runs as if run directly (no TensorFlow needed) ---------------------------------


def _probe(cwd, argv, env):
    code, lines, err = run(argv, cwd, env)
    return code, json.loads(lines[0]), lines[1:], err


@pytest.mark.parametrize("relative", [True, False])
def test_file_argv_and_sys_path_are_as_if_run_directly(tmp_path, relative):
    folder = tmp_path / "scripts"
    folder.mkdir()
    script = folder / "probe.py"
    script.write_text(open(PROBE).read())
    typed = os.path.join("scripts", "probe.py") if relative else str(script)
    env = clean_env()
    _code, direct, _rest, _err = _probe(tmp_path, [sys.executable, typed, "ok", "--flag"], env)
    _code, hooked, _rest, _err = _probe(tmp_path, RUNNER + ["--", typed, "ok", "--flag"], env)
    assert direct["injected"] is None and hooked["injected"] is True
    for key in ("file", "argv", "path0", "name"):
        assert hooked[key] == direct[key], key
    assert hooked["path0"] == str(folder) and hooked["argv"] == [typed, "ok", "--flag"]
    assert hooked["tensorflow"] is False  # nothing imported TensorFlow before the script


def test_module_form_is_as_if_run_with_python_m(tmp_path):
    (tmp_path / "probe_module.py").write_text(open(PROBE).read())
    env = clean_env()
    _code, direct, _rest, _err = _probe(tmp_path, [sys.executable, "-m", "probe_module", "ok"], env)
    _code, hooked, _rest, _err = _probe(tmp_path, RUNNER + ["-m", "probe_module", "ok"], env)
    for key in ("file", "argv", "path0", "name"):
        assert hooked[key] == direct[key], key


@pytest.mark.parametrize("action, status", [(["exit", "3"], 3), (["exit", "0"], 0), (["message"], 1),
                                            (["raise"], 1), (["signal"], -signal.SIGTERM)])
def test_exit_status_and_errors_pass_through(tmp_path, action, status):
    env = clean_env(NPU_DUMP_HOOK_ALLOW_NO_BUNDLE="1")  # the probe trains nothing: no bundle, its own status
    code, _lines, err = run([sys.executable, PROBE] + action, tmp_path, env)
    hooked_code, _lines, hooked_err = run(RUNNER + [PROBE] + action, tmp_path, env)
    assert code == status and hooked_code == status
    if action == ["raise"]:  # the traceback Python prints, without the runner's or runpy's frames
        assert hooked_err == err
        assert "runner" not in hooked_err and "runpy" not in hooked_err
    if action == ["message"]:
        assert "bye from the script" in hooked_err


def test_missing_script_is_reported_as_python_does(tmp_path):
    code, _lines, err = run(RUNNER + ["nosuch.py"], tmp_path, clean_env())
    assert code == 2 and "can't open file 'nosuch.py'" in err


def test_disabled_runner_runs_the_script_without_injecting(tmp_path):
    _code, hooked, _rest, _err = _probe(tmp_path, RUNNER + [PROBE], clean_env(NPU_DUMP_HOOK_RUN="0"))
    assert hooked["injected"] is False


def test_a_bad_variable_stops_before_the_script_runs(tmp_path):
    code, lines, err = run(RUNNER + [PROBE], tmp_path, clean_env(NPU_DUMP_HOOK_MAX_STEPS="0"))
    assert (code, lines) == (2, [])
    assert err == "npu-dump-hook: option NPU_DUMP_HOOK_MAX_STEPS='0': must be at least 1\n"


def test_environment_only_start_chains_the_sitecustomize_it_hides(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['OTHER_SITECUSTOMIZE_RAN'] = '1'\n")
    probe = tmp_path / "check.py"
    probe.write_text("import os, sys\nprint(os.environ.get('OTHER_SITECUSTOMIZE_RAN'), "
                     "sys.modules['npu_dump_hook.runner'].installed() is not None)\n")
    pythonpath = os.pathsep.join([runner.site_dir(), str(other)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    code, lines, err = run([sys.executable, str(probe)], tmp_path,
                           clean_env(NPU_DUMP_HOOK_RUN="1", PYTHONPATH=pythonpath))
    assert code == 0, err
    assert lines[0] == "1 True"
    assert "no training was seen" in err  # said at exit: this program trained nothing


# -- settings (no process needed) ----------------------------------------------------------------


@pytest.mark.parametrize("level", ["WARNING", "INFO"])
def test_summary_and_golden_hint_under_the_runner_are_no_warnings_and_name_the_command(tmp_path, level):
    # Issue 21 point 9: "npu-dump-hook: warning: bundle ..." and a hint naming the Python API.
    env = _runner_env(tmp_path, NPU_DUMP_HOOK_BACKEND="emulated", NPU_DUMP_HOOK_EMULATE_PROFILE="ascend",
                      NPU_DUMP_HOOK_LOG_LEVEL=level)
    code, lines, err = run(RUNNER + [MONITORED, "0"], tmp_path, env)
    assert code == 0, err[-3000:]
    summary = [line for line in err.splitlines() if "bundle {}: 1 training step(s)".format(lines[-1]) in line]
    assert summary and all(line.startswith("npu-dump-hook: bundle ") for line in summary), err[-3000:]
    assert len(summary) == 1 and "warning: bundle" not in err
    hint = "make them in a second run: npu-dump-hook run --golden-for {} -- python {} 0".format(lines[-1], MONITORED)
    assert sum(hint in line for line in err.splitlines()) == 1, err[-3000:]
    assert "NpuDumpHook(backend='reference'" not in err


def test_summary_line_goes_quiet_with_quiet(tmp_path):
    env = _runner_env(tmp_path, NPU_DUMP_HOOK_LOG_LEVEL="ERROR")
    code, lines, err = run(RUNNER + [SESSION], tmp_path, env)
    assert code == 0 and "bundle " + lines[-1] not in err, err[-3000:]


def test_settings_read_every_hook_variable(tmp_path):
    env = {"NPU_DUMP_HOOK_MAX_STEPS": "3", "NPU_DUMP_HOOK_RANDOMNESS": "pin", "NPU_DUMP_HOOK_SEED": "-7",
           "NPU_DUMP_HOOK_BACKEND": "emulated", "NPU_DUMP_HOOK_EMULATE_PRECISION": "fp16",
           "NPU_DUMP_HOOK_REFERENCE": "no", "NPU_DUMP_HOOK_SAVE_INITIAL_STATE": "0",
           "NPU_DUMP_HOOK_OUTPUT_DIR": "out", "NPU_DUMP_HOOK_BUNDLE_DIR": "b", "NPU_DUMP_HOOK_STRICT": "false",
           "NPU_DUMP_HOOK_RANKS": "0,2", "NPU_DUMP_HOOK_GRAPH_KEYWORD": "IteratorV2",
           "NPU_DUMP_HOOK_LINK": "copy", "NPU_DUMP_HOOK_CHECKSUM": "none", "NPU_DUMP_HOOK_ARCHIVE": "tar",
           "NPU_DUMP_HOOK_STOP": "continue", "NPU_DUMP_HOOK_LOG_LEVEL": "info",
           "NPU_DUMP_HOOK_EMULATE_PROFILE": "ascend", "NPU_DUMP_HOOK_FAULTS": " conv2/Conv2D = scale=1.05;fc/MatMul=nan;",
           "NPU_DUMP_HOOK_ON_MISMATCH": "warn", "NPU_DUMP_HOOK_MAX_INPUT_BYTES": "1024",
           "NPU_DUMP_HOOK_REPLAY_INPUTS": "0", "NPU_DUMP_HOOK_MODE": "infer", "NPU_DUMP_HOOK_MAX_DUMP_SIZE": "2G"}
    settings = runner.RunSettings.from_env(env)
    assert sorted(settings.hook_options) == sorted(set(constants.ENV_RUN_HOOK_OPTIONS) - {"initial_state"})
    assert settings.hook_options == {
        "max_steps": 3, "randomness": "pin", "seed": -7, "backend": "emulated", "emulate_precision": "fp16",
        "reference": False, "save_initial_state": False, "output_dir": "out", "bundle_dir": "b", "strict": False,
        "ranks": (0, 2), "graph_keyword": "IteratorV2", "link": "copy", "checksum": "none", "archive": "tar",
        "emulate_profile": "ascend", "faults": {"conv2/Conv2D": "scale=1.05", "fc/MatMul": "nan"},
        "on_mismatch": "warn", "max_input_bytes": 1024, "replay_inputs": False, "mode": "infer",
        "max_dump_size": 2 << 30}
    # the golden run: initial_state (made absolute: the script may change directory), backend unset or reference
    (tmp_path / "npu_bundle").mkdir()
    for backend in ({}, {"NPU_DUMP_HOOK_BACKEND": "reference"}):
        golden = runner.RunSettings.from_env(dict(backend, NPU_DUMP_HOOK_INITIAL_STATE=str(tmp_path / "npu_bundle")))
        assert golden.hook_options["initial_state"] == str(tmp_path / "npu_bundle")
    assert (settings.stop, settings.log_level, settings.enabled) == ("continue", "INFO", True)
    assert runner.RunSettings.from_env({}) == runner.RunSettings()


@pytest.mark.parametrize("var, value, rule", [
    ("NPU_DUMP_HOOK_RANDOMNESS", "none", "must be one of audit|pin|strip|error"),
    ("NPU_DUMP_HOOK_SEED", "x", "must be an integer"),
    ("NPU_DUMP_HOOK_STRICT", "maybe", "must be one of 1/true/yes/on or 0/false/no/off"),
    ("NPU_DUMP_HOOK_RANKS", "0;1", "must be rank numbers separated by commas, e.g. 0,1"),
    ("NPU_DUMP_HOOK_STOP", "later", "must be one of exit|continue"),
    ("NPU_DUMP_HOOK_RUN", "2", "must be one of 1/true/yes/on or 0/false/no/off"),
    ("NPU_DUMP_STEP", "0|", None),
    ("NPU_DUMP_HOOK_EMULATE_PROFILE", "gpu", "must be one of exact|ascend"),
    ("NPU_DUMP_HOOK_ON_MISMATCH", "ignore", "must be one of error|warn"),
    ("NPU_DUMP_HOOK_INITIAL_STATE", "no/such/bundle",
     "no such file or folder (an NPU bundle folder or .tar/.tar.gz archive)"),
    ("NPU_DUMP_HOOK_FAULTS", "conv2/Conv2D", "entry 'conv2/Conv2D' is not OP=SPEC (e.g. conv2/Conv2D=scale=1.05; "
                                             "entries separated by ';')"),
    ("NPU_DUMP_HOOK_FAULTS", "a=nan; =nan", "entry '=nan' is not OP=SPEC (e.g. conv2/Conv2D=scale=1.05; "
                                            "entries separated by ';')"),
    ("NPU_DUMP_HOOK_FAULTS", "a=nan;a=overflow", "op 'a' is given twice"),
    ("NPU_DUMP_HOOK_FAULTS", "a=scale=x", "entry 'a=scale=x': scale needs a number: expected scale=X, "
                                          "add_noise=S, nondeterministic=S (X, S finite > 0), overflow or nan"),
    ("NPU_DUMP_HOOK_FAULTS", "a=nan=1", "entry 'a=nan=1': nan takes no value: expected scale=X, "
                                        "add_noise=S, nondeterministic=S (X, S finite > 0), overflow or nan"),
    ("NPU_DUMP_HOOK_FAULTS", " ; ", "names no fault: give OP=SPEC entries separated by ';'"),
])
def test_settings_errors_name_the_variable(var, value, rule):
    with pytest.raises(OptionError) as raised:
        runner.RunSettings.from_env({var: value})
    assert raised.value.option == var
    if rule is not None:
        assert raised.value.rule == rule


@pytest.mark.parametrize("env, var, rule", [
    ({"NPU_DUMP_HOOK_BACKEND": "emulated"}, "NPU_DUMP_HOOK_INITIAL_STATE",
     "is for the golden run, whose backend is reference, not emulated (NPU_DUMP_HOOK_BACKEND=emulated)"),
    ({"NPU_DUMP_HOOK_FAULTS": "a=nan"}, "NPU_DUMP_HOOK_FAULTS",
     "applies to the emulated NPU run only, not to the golden run"),
    ({"NPU_DUMP_HOOK_EMULATE_PROFILE": "ascend"}, "NPU_DUMP_HOOK_EMULATE_PROFILE",
     "applies to the emulated NPU run only, not to the golden run"),
])
def test_golden_run_settings_that_cannot_go_together(tmp_path, env, var, rule):
    with pytest.raises(OptionError) as raised:
        runner.RunSettings.from_env(dict(env, NPU_DUMP_HOOK_INITIAL_STATE=str(tmp_path)))
    assert (raised.value.option, raised.value.rule) == (var, rule)
    with pytest.raises(OptionError) as raised:
        runner.RunSettings.from_env({"NPU_DUMP_HOOK_BACKEND": "npu", "NPU_DUMP_HOOK_FAULTS": "a=nan"})
    assert raised.value.rule == "applies to the emulated NPU run only, not to the real NPU"


def test_faults_round_trip_through_their_variable():
    faults = {"conv2/Conv2D": "scale=1.05", "block_1/dense/MatMul": "add_noise=0.01", "x": "overflow"}
    text = runner.format_faults(faults)
    assert text == "conv2/Conv2D=scale=1.05;block_1/dense/MatMul=add_noise=0.01;x=overflow"
    assert runner.parse_faults(text) == faults
    with pytest.raises(OptionError) as raised:
        runner.format_faults({"a;b": "nan"})
    assert raised.value.option == "faults"


def test_a_bad_variable_exits_with_the_command_lines_usage_status():
    assert runner.EXIT_USAGE == _exit.EXIT_USAGE


def _raised(call, error):
    try:
        call(error)
    except BaseException as exc:  # noqa: BLE001 - the test looks at what was raised
        return exc
    raise AssertionError("nothing raised")


def test_only_an_npu_dump_error_under_the_injected_hooks_methods_is_the_hooks_own():
    """The rule that makes it one line ``npu-dump-hook: ErrorType: message`` (issue 21 point 9);
    anything else keeps the traceback Python prints."""
    from npu_dump_hook.errors import FingerprintMismatchError
    from npu_dump_hook.runner._hook_error import raised_by_the_hook
    from npu_dump_hook.runner._inject import Injection
    from npu_dump_hook.runner._settings import RunSettings

    class Hook(object):
        def begin(self, error):
            raise error

    def scripts_own(error):
        raise error

    injection = Injection(RunSettings())
    injection.hook = Hook()
    assert raised_by_the_hook(_raised(injection.hook.begin, FingerprintMismatchError("differs")), injection)
    assert not raised_by_the_hook(_raised(Hook().begin, FingerprintMismatchError("differs")), injection)
    assert not raised_by_the_hook(_raised(injection.hook.begin, RuntimeError("not ours")), injection)
    assert not raised_by_the_hook(_raised(scripts_own, OptionError("faults", "x", "its own check")), injection)
    injection.hook = None  # the script brought its own hook: nothing the runner made is at work
    assert not raised_by_the_hook(_raised(Hook().begin, FingerprintMismatchError("differs")), injection)


#: Environment-only mode, no TensorFlow: an object standing for the hook the injection handed out
#: raises the golden run's error in its method ("hook"), or the script raises it itself ("script").
HOOK_ERROR_SCRIPT = """
import sys
from npu_dump_hook.errors import FingerprintMismatchError
from npu_dump_hook.runner import installed

class Hook(object):
    def begin(self):
        raise FingerprintMismatchError("the model differs")

injection = installed()
injection.hook = Hook()
if sys.argv[1] == "hook":
    injection.hook.begin()
raise FingerprintMismatchError("the script's own")
"""


@pytest.mark.parametrize("level", ["WARNING", "INFO"])
def test_environment_only_start_tells_the_hooks_own_error_as_one_line(tmp_path, level):
    script = tmp_path / "train.py"
    script.write_text(HOOK_ERROR_SCRIPT)
    pythonpath = os.pathsep.join(p for p in (runner.site_dir(), os.environ.get("PYTHONPATH")) if p)
    env = clean_env(NPU_DUMP_HOOK_RUN="1", PYTHONPATH=pythonpath, NPU_DUMP_HOOK_LOG_LEVEL=level)
    code, _lines, err = run([sys.executable, str(script), "hook"], tmp_path, env)
    assert code == 1 and err.splitlines()[-1] == "npu-dump-hook: FingerprintMismatchError: the model differs", err
    assert ("Traceback" in err) is (level == "INFO"), err
    code, _lines, err = run([sys.executable, str(script), "script"], tmp_path, env)
    assert code == 1 and err.startswith("Traceback (most recent call last):"), err
    assert "FingerprintMismatchError: the script's own" in err and "npu-dump-hook: FingerprintMismatch" not in err
