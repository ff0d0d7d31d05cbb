"""``npu-dump-hook run -- python train.py ARGS``: unmodified scripts, one bundle, the script's status.

The training runs go through the real command in a fresh process (``python -m npu_dump_hook run``),
real TensorFlow on the emulated backend; option handling is checked in-process.
"""
import json
import os
import signal
import sys

import pytest

from npu_dump_hook.cli import main
from npu_dump_hook.cli import _run as cli_run
from npu_dump_hook.cli._exit import EXIT_USAGE, CliError

from helpers.runs import ESTIMATOR, MONITORED, PROBE, SESSION, assert_one_training_bundle, clean_env, run

CLI = [sys.executable, "-m", "npu_dump_hook", "run"]


def _env_with_python_on_path():
    """``python`` on PATH is this interpreter (the form users type)."""
    return clean_env(PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))


# -- the three unmodified scripts ----------------------------------------------------------------


def test_estimator_subclass_script_with_an_explicit_interpreter(tmp_path):
    out = tmp_path / "out"
    code, lines, err = run(CLI + ["--output-dir", str(out), "--", sys.executable, ESTIMATOR, str(tmp_path / "model"),
                                  "subclass"], tmp_path, clean_env())
    assert code == 0, err[-3000:]
    assert lines[-2] == "trained to step 1"
    assert_one_training_bundle(out, lines)


def test_monitored_script_with_options_passes_its_exit_status_through(tmp_path):
    out = tmp_path / "out"
    code, lines, err = run(CLI + ["--output-dir", str(out), "--dump-mode", "all", "--randomness", "pin",
                                  "--", MONITORED, "3"], tmp_path, clean_env())
    assert code == 3, err[-3000:]  # the script's own sys.exit(3), after its bundle was written
    assert lines[-2] == "steps 1"
    doc = assert_one_training_bundle(out, lines)
    assert doc["options"]["dump_mode"] == "all" and doc["randomness"]["policy"] == "pin"


def test_plain_session_script_with_python_from_path(tmp_path):
    out = tmp_path / "out"
    code, lines, err = run(CLI + ["-q", "--output-dir", str(out), "--", "python", SESSION], tmp_path,
                           _env_with_python_on_path())
    assert code == 0, err[-3000:]
    assert len(lines) == 3 and not any(line.startswith("iterations") for line in lines)
    assert_one_training_bundle(out, lines)
    assert "npu-dump-hook: warning:" not in err  # -q reaches the script's process too


# -- exit status of scripts that fail (no TensorFlow needed) --------------------------------------


@pytest.mark.parametrize("action, status", [(["exit", "5"], 5), (["raise"], 1), (["option_error"], 1),
                                            (["signal"], 128 + signal.SIGTERM)])
def test_the_scripts_exit_status_is_the_commands(tmp_path, action, status):
    code, lines, err = run(CLI + ["--", PROBE] + action, tmp_path, clean_env())
    assert code == status, err
    assert json.loads(lines[0])["injected"] is True
    if action == ["raise"]:
        assert err.startswith("Traceback (most recent call last):") and "RuntimeError: boom from the script" in err
    if action == ["option_error"]:  # the script's own OptionError (no option of the run): its crash, traced
        assert err.startswith("Traceback (most recent call last):") and "the script's own check" in err, err


def test_a_fault_naming_no_op_is_one_line_exit_2_not_the_scripts_traceback(tmp_path):
    """Found wrong only once the graph exists (the session's first run, inside the script): still
    the user's option, told as a bad option before the script starts is (the wrong one of two)."""
    code, lines, err = run(CLI + ["--backend", "emulated", "--output-dir", str(tmp_path / "out"),
                                  "--fault", "MatMul=scale=1.05", "--fault", "no/such/op=nan", "--", SESSION],
                           tmp_path, clean_env())
    assert code == EXIT_USAGE, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert err.splitlines()[-1] == "npu-dump-hook: option --fault='no/such/op=nan': names no op of the graph", err
    assert not any(line.startswith("iterations") for line in lines), lines


def test_script_arguments_that_look_like_options_are_the_scripts(tmp_path):
    code, lines, _err = run(CLI + ["--allow-no-bundle", "--", PROBE, "ok", "--dump-path", "-q", "--"], tmp_path,
                            clean_env())  # the probe trains nothing: without the flag, status 4 (no bundle)
    assert code == 0
    assert json.loads(lines[0])["argv"] == [PROBE, "ok", "--dump-path", "-q", "--"]


# -- usage errors: one line, exit 2, nothing started ----------------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["run"], "npu-dump-hook: run: give the script to run after -- (e.g. npu-dump-hook run -- python train.py)"),
    (["run", "--", "python"], "npu-dump-hook: run: give the script to run after -- "
                              "(e.g. npu-dump-hook run -- python train.py)"),
    (["run", "--", "nosuch.py"], "npu-dump-hook: nosuch.py: no such file or folder"),
    (["run", "--", "python3.99", PROBE], "npu-dump-hook: python3.99: no such interpreter (not on PATH)"),
    (["run", "--", "python", "-c", "print(1)"], "npu-dump-hook: run: python option -c is not supported: "
                                               "give a script or -m MODULE"),
    (["run", "--dump-step", "0|", "--", PROBE], "npu-dump-hook: option --dump-step='0|': must match "
                                                "^\\d+(-\\d+)?(\\|\\d+(-\\d+)?)*$ (e.g. '0|5|10-20'; no spaces, "
                                                "no empty items)"),
    (["run", "--max-steps", "0", "--", PROBE], "npu-dump-hook: option --max-steps='0': must be at least 1"),
    (["run", "--ranks", "first", "--", PROBE], "npu-dump-hook: option --ranks='first': must be rank numbers "
                                               "separated by commas, e.g. 0,1"),
    (["run", "--emulate-precision", "fp8", "--", PROBE], "npu-dump-hook: option --emulate-precision='fp8': "
                                                         "must be one of fp32|fp16"),
])
def test_usage_errors_are_one_line_exit_2(capsys, monkeypatch, argv, message):
    monkeypatch.setattr(cli_run, "_run_child", _must_not_run)
    code = main(argv)
    out, err = capsys.readouterr()
    assert (code, out) == (EXIT_USAGE, "")
    assert err == message + "\n"


def _must_not_run(*_args, **_kwargs):
    raise AssertionError("the script was started")


def test_variables_already_in_the_environment_are_named_as_such(capsys, monkeypatch):
    monkeypatch.setattr(cli_run, "_run_child", _must_not_run)
    monkeypatch.setenv("NPU_DUMP_HOOK_SEED", "abc")
    assert main(["run", "--", PROBE]) == EXIT_USAGE
    assert capsys.readouterr().err == "npu-dump-hook: option NPU_DUMP_HOOK_SEED='abc': must be an integer\n"


# -- what the command hands the script's process ---------------------------------------------------


@pytest.mark.parametrize("words, expected", [
    (["train.py", "a"], (None, [], ["--", "train.py", "a"])),
    (["python", "-u", "-W", "ignore", "-Xdev", "-OO", "train.py", "-u"],
     ("python", ["-u", "-W", "ignore", "-Xdev", "-OO"], ["--", "train.py", "-u"])),
    (["python", "-m", "pkg.train", "--lr", "1"], ("python", [], ["-m", "pkg.train", "--lr", "1"])),
    (["python", "-um", "pkg.train"], ("python", ["-u"], ["-m", "pkg.train"])),
    (["python", "--", "train.py"], ("python", [], ["--", "train.py"])),
])
def test_the_command_after_the_double_dash(tmp_path, monkeypatch, words, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")
    python, options, target = cli_run.split_command(words)
    interpreter, want_options, want_target = expected
    assert python == sys.executable  # none given, or a bare "python": this interpreter (issue 21 point 9)
    assert (options, target) == (want_options, want_target)


def test_a_bare_python_of_this_version_is_this_interpreter_a_path_or_other_name_is_not(tmp_path, monkeypatch):
    # Issue 21 point 9: "-- python" ran PATH's python, not the venv's (ModuleNotFoundError: tensorflow).
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")
    version = "python{}.{}".format(*sys.version_info[:2])
    for word in ("python", "python3", version):
        assert cli_run.split_command([word, "train.py"])[0] == sys.executable
    other = tmp_path / "bin" / "python3.6"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    assert cli_run.split_command([str(other), "train.py"])[0] == str(other)  # a path runs that file
    monkeypatch.setenv("PATH", str(other.parent))
    assert cli_run.split_command(["python3.6", "train.py"])[0] == str(other)  # another version: PATH's
    with pytest.raises(CliError, match="no such interpreter .not on PATH."):
        cli_run.split_command(["pypy3", "train.py"])
    with pytest.raises(CliError, match="no such interpreter .no such file."):
        cli_run.split_command([str(tmp_path / "python"), "train.py"])
    (tmp_path / "python3").write_text("#!/bin/sh\n")  # a path that is not executable, or a folder: not an interpreter
    (tmp_path / "python3.5").mkdir()
    for word in ("python3", "python3.5"):
        with pytest.raises(CliError, match="no such interpreter .no such file."):
            cli_run.split_command([str(tmp_path / word), "train.py"])


def test_flags_become_the_scripts_variables(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NPU_DUMP_ENABLE", "1")  # inherited, contradicted by --dump-debug below
    seen = {}

    def capture(command, env):
        seen.update(command=command, env=env)
        return 0

    monkeypatch.setattr(cli_run, "_run_child", capture)
    (tmp_path / "train.py").write_text("")
    assert main(["run", "-v", "--dump-debug", "--dump-path", "d", "--max-steps", "2", "--no-strict",
                 "--no-initial-state", "--ranks", "0,1", "--output-dir", "o", "--stop", "continue", "--",
                 "train.py", "--lr", "1"]) == 0
    env = seen["env"]
    assert (env["NPU_DUMP_ENABLE"], env["NPU_DUMP_DEBUG_ENABLE"], env["NPU_DUMP_PATH"]) == ("0", "1", str(tmp_path / "d"))
    assert (env["NPU_DUMP_HOOK_MAX_STEPS"], env["NPU_DUMP_HOOK_STRICT"], env["NPU_DUMP_HOOK_SAVE_INITIAL_STATE"],
            env["NPU_DUMP_HOOK_RANKS"], env["NPU_DUMP_HOOK_OUTPUT_DIR"], env["NPU_DUMP_HOOK_STOP"],
            env["NPU_DUMP_HOOK_LOG_LEVEL"], env["NPU_DUMP_HOOK_RUN"]) == (
        "2", "0", "0", "0,1", str(tmp_path / "o"), "continue", "INFO", "1")
    assert "NPU_DUMP_HOOK_RANDOMNESS" not in env  # unset flags leave the hook's defaults
    assert seen["command"][0] == sys.executable and seen["command"][-3:] == ["train.py", "--lr", "1"]


def test_workflow_flags_become_the_scripts_variables(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    seen = {}
    monkeypatch.setattr(cli_run, "_run_child", lambda command, env: seen.update(env=env) or 0)
    (tmp_path / "train.py").write_text("")
    assert main(["run", "--backend", "emulated", "--emulate-profile", "ascend", "--fault", "conv2/Conv2D=scale=1.05",
                 "--fault", " fc1/MatMul = nan", "--", "train.py"]) == 0
    env = seen["env"]
    assert (env["NPU_DUMP_HOOK_EMULATE_PROFILE"], env["NPU_DUMP_HOOK_FAULTS"]) == (
        "ascend", "conv2/Conv2D=scale=1.05; fc1/MatMul = nan")
    assert "NPU_DUMP_HOOK_INITIAL_STATE" not in env and "NPU_DUMP_HOOK_ON_MISMATCH" not in env
    (tmp_path / "npu_bundle").mkdir()
    assert main(["run", "--golden-for", "npu_bundle", "--on-mismatch", "warn", "--", "train.py"]) == 0
    env = seen["env"]
    assert (env["NPU_DUMP_HOOK_INITIAL_STATE"], env["NPU_DUMP_HOOK_ON_MISMATCH"]) == ("npu_bundle", "warn")
    assert "NPU_DUMP_HOOK_FAULTS" not in env and "NPU_DUMP_HOOK_BACKEND" not in env


def test_split_command_rejects_what_it_cannot_run():
    for words in (["python", "-"], ["python", "-m"], ["python", "-W"], ["python", "--version"]):
        with pytest.raises(CliError) as raised:
            cli_run.split_command(words)
        assert raised.value.code == EXIT_USAGE


def test_run_help_names_the_variables_the_options_set(capsys):
    assert main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert "dump options (NPU_DUMP_*" in out and "hook options (NPU_DUMP_HOOK_*)" in out
    assert "usage: npu-dump-hook run [options] -- [python [PYTHON_OPTIONS]] SCRIPT|-m MODULE [ARGS...]" in out


@pytest.mark.parametrize("backend, capture", [("golden", "--golden"), ("reference", "--reference"),
                                              ("golden", "--no-reference"), ("reference", "--no-golden")])
def test_golden_and_its_alias_reference_reach_the_script_alike(tmp_path, monkeypatch, backend, capture):
    from npu_dump_hook.runner import RunSettings

    monkeypatch.chdir(tmp_path)
    seen = {}
    monkeypatch.setattr(cli_run, "_run_child", lambda command, env: seen.update(env=env) or 0)
    (tmp_path / "train.py").write_text("")
    (tmp_path / "npu_bundle").mkdir()
    assert main(["run", "--backend", backend, capture, "--golden-for", "npu_bundle", "--", "train.py"]) == 0
    env = seen["env"]
    assert env["NPU_DUMP_HOOK_REFERENCE"] == ("0" if capture.startswith("--no-") else "1")
    options = RunSettings.from_env(env).hook_options
    assert options["backend"] == "golden" and options["reference"] is not capture.startswith("--no-")
