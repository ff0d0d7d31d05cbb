"""An error about an option names it as the user gave it (issue #21): the ``npu-dump-hook run``
flag (``--golden-for``), the variable (``NPU_DUMP_HOOK_INITIAL_STATE``) when the environment
set it, the keyword (``initial_state``) for a hook made in Python. The flag is known from the
settings table; the run command lists the variables its flags set in NPU_DUMP_HOOK_FLAGS."""
import os
import sys

import pytest

from npu_dump_hook import settings
from npu_dump_hook.errors import NpuDumpError, OptionError
from npu_dump_hook.runner._settings import as_given

from helpers.runs import SESSION, clean_env, run

VAR = settings.variable("initial_state")


def _error(option="initial_state", value="/abs/bundle"):
    return OptionError(option, value, "has no data/bundle.json")


@pytest.mark.parametrize("env, named", [
    ({VAR: "bundle", settings.ENV_RUN_FLAGS: VAR}, "--golden-for"),
    ({VAR: "bundle", settings.ENV_RUN_FLAGS: "NPU_DUMP_HOOK_SEED"}, VAR),
    ({VAR: "bundle"}, VAR),
    ({settings.ENV_RUN_FLAGS: VAR}, "initial_state"),  # listed but not set: not given through it
])
def test_initial_state_is_named_as_given(env, named):
    renamed = as_given(_error(value=os.path.abspath("bundle")), env)
    assert isinstance(renamed, OptionError) and renamed.option == named
    assert str(renamed).startswith("option {}=".format(named)) and "has no data/bundle.json" in str(renamed)
    # the text typed is shown, not the path made absolute from it
    assert renamed.value == ("bundle" if named != "initial_state" else os.path.abspath("bundle"))


def test_value_naming_more_than_the_bundle_is_kept():
    env = {VAR: "bundle", settings.ENV_RUN_FLAGS: VAR}
    where = os.path.abspath("bundle") + ": data/inputs/x.npy"
    renamed = as_given(_error(value=where), env)
    assert (renamed.option, renamed.value) == ("--golden-for", where)


def test_on_off_flag_and_dump_flag_are_the_ones_typed():
    golden = settings.variable("reference")
    env = {golden: "0", "NPU_DUMP_PATH": "/d", settings.ENV_RUN_FLAGS: " ".join([golden, "NPU_DUMP_PATH"])}
    assert as_given(OptionError("reference", False, "rule"), env).option == "--no-golden"
    assert as_given(OptionError("dump_path", "/d", "rule"), env).option == "--dump-path"
    other = NpuDumpError("not an option error")
    assert as_given(other, env) is other


def test_golden_for_a_folder_that_is_no_bundle_names_the_flag(tmp_path):
    """The bundle is refused in the script's process (exit 2, before training): the line names
    ``--golden-for`` and the folder as typed, not the variable the run command passed it in."""
    (tmp_path / "empty").mkdir()
    argv = [sys.executable, "-m", "npu_dump_hook", "run", "--output-dir", "out", "--golden-for", "empty",
            "--", SESSION]
    code, _lines, err = run(argv, tmp_path, clean_env())
    assert code == 2, err[-2000:]
    assert "option --golden-for='empty': " in err and "has no data/bundle.json" in err, err[-2000:]
    assert VAR not in err
