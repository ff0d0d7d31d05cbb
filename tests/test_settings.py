"""npu_dump_hook.settings: one row per keyword, and everything built from the rows agrees with it."""
import argparse
import inspect

import pytest

from npu_dump_hook import constants, settings
from npu_dump_hook.cli import build_parser
from npu_dump_hook.errors import OptionError


def test_the_runner_variables_are_the_rows_variables():
    assert constants.ENV_RUN_HOOK_OPTIONS == {row.name: row.env for row in settings.rows(settings.HOOK) if row.env}
    variables = [row.env for row in settings.rows() if row.env]
    assert len(variables) == len(set(variables))
    assert all(row.parse is not None for row in settings.rows() if row.env)


def test_every_hook_keyword_has_a_row():
    from npu_dump_hook.hook import NpuDumpHook

    keywords = set(inspect.signature(NpuDumpHook.__init__).parameters) - {"self", "options"}
    assert keywords == set(settings.HOOK_KEYWORDS)


def test_the_run_commands_hook_flags_are_the_rows_flags():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    group = next(g for g in sub["run"]._action_groups if g.title == "hook options (NPU_DUMP_HOOK_*)")
    flags = [opt for action in group._group_actions for opt in action.option_strings]
    expected = [flag for row in settings.rows() for flag in (row.flag, row.negative) if flag]
    assert flags == expected
    assert all(settings.SETTINGS[action.dest].env for action in group._group_actions)


@pytest.mark.parametrize("name, value, rule", [
    ("max_steps", 0, "must be a positive int"),
    ("max_steps", True, "must be a positive int"),
    ("max_steps", 1.5, "must be a positive int"),
    ("randomness", "none", "must be one of audit|pin|strip|error"),
    ("on_mismatch", "ignore", "must be one of error|warn"),
    ("stop", "later", "must be one of exit|continue"),
])
def test_check_keyword_names_the_keyword_and_its_rule(name, value, rule):
    with pytest.raises(OptionError) as raised:
        settings.check_keyword(name, value)
    assert (raised.value.option, raised.value.value, raised.value.rule) == (name, value, rule)


@pytest.mark.parametrize("name, value", [("max_steps", None), ("max_steps", 3), ("randomness", "pin"),
                                         ("seed", -1), ("stop", "continue")])
def test_check_keyword_accepts_good_values(name, value):
    settings.check_keyword(name, value)


def test_a_combination_rule_is_reported_as_the_caller_spells_it():
    values = {"backend": "emulated", "initial_state": "/b"}
    with pytest.raises(OptionError) as raised:
        settings.check_combination(values)
    assert (raised.value.option, raised.value.rule) == (
        "initial_state", "is for the golden run, whose backend is reference, not emulated (backend=emulated)")
    with pytest.raises(OptionError) as raised:
        settings.check_combination(values, spelled=lambda k: settings.SETTINGS[k].flag, given=lambda k: "typed")
    assert (raised.value.option, raised.value.value, raised.value.rule) == (
        "--golden-for", "typed", "is for the golden run, whose backend is reference, not emulated (--backend=emulated)")
    with pytest.raises(OptionError, match="not to the real NPU"):
        settings.check_combination({"backend": "npu", "faults": {"a": "nan"}})
    settings.check_combination({"backend": "emulated", "faults": {"a": "nan"}, "emulate_profile": "ascend"})


def test_read_gives_the_default_for_an_unset_or_empty_variable():
    assert settings.read("seed", {}) == settings.SETTINGS["seed"].default
    assert settings.read("stop", {"NPU_DUMP_HOOK_STOP": ""}) == "exit"
    assert settings.read("log_level", {"NPU_DUMP_HOOK_LOG_LEVEL": "debug"}) == "DEBUG"
    assert settings.read_all(settings.HOOK, {"NPU_DUMP_HOOK_SEED": "3", "NPU_DUMP_HOOK_RANKS": ""}) == {"seed": 3}


def test_a_flag_value_becomes_its_variables_text():
    rows = settings.SETTINGS
    assert rows["strict"].variable_text(False) == "0" and rows["strict"].flag_for(False) == "--no-strict"
    assert rows["save_initial_state"].flag_for(False) == "--no-initial-state"
    assert rows["faults"].variable_text(["a=nan", "b=overflow"]) == "a=nan;b=overflow"
    assert rows["initial_state"].flag_for("x") == "--golden-for"


# -- golden: the name; reference: its documented alias (README "Names") ---------------------------


@pytest.mark.parametrize("typed", ["golden", "reference"])
def test_backend_golden_and_its_alias_reference_are_one_value(typed):
    assert typed in settings.BACKEND_CHOICES and settings.BACKEND_CHOICES == constants.BACKEND_CHOICES
    assert settings.canonical("backend", typed) == settings.GOLDEN_BACKEND == "golden"
    assert settings.read("backend", {"NPU_DUMP_HOOK_BACKEND": typed}) == "golden"
    assert settings.read_all(settings.HOOK, {"NPU_DUMP_HOOK_BACKEND": typed}) == {"backend": "golden"}
    settings.check_combination({"backend": typed, "initial_state": "/b"})  # the golden run's own backend
    for keyword, value in (("faults", {"a": "nan"}), ("emulate_profile", "ascend")):
        with pytest.raises(OptionError, match="not to the golden run") as raised:
            settings.check_combination({"backend": typed, keyword: value})
        assert raised.value.option == keyword


def test_canonical_leaves_other_values_and_objects_alone():
    backend = object()
    assert settings.canonical("backend", backend) is backend
    assert [settings.canonical("backend", name) for name in ("auto", "npu", "emulated")] == ["auto", "npu", "emulated"]
    assert settings.canonical("randomness", "reference") == "reference"  # an alias of backend only


def test_the_golden_flags_and_their_aliases_set_one_keyword():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    group = next(g for g in sub["run"]._action_groups if g.title == "aliases (older spellings, same behaviour)")
    aliases = {opt: action for action in group._group_actions for opt in action.option_strings}
    row = settings.SETTINGS["reference"]
    assert (row.flag, row.negative) == ("--golden", "--no-golden")
    assert sorted(aliases) == sorted(row.flag_aliases) == ["--no-reference", "--reference"]
    assert all(action.dest == "reference" for action in aliases.values())
    run = sub["run"]
    for argv, value in ((["--golden"], True), (["--reference"], True), (["--no-golden"], False),
                        (["--no-reference"], False), ([], None)):
        assert run.parse_args(argv + ["--", "train.py"]).reference is value, argv


# -- the hook's keywords are checked by the table (issue 19: not by hook.py) ----------------------


def test_check_hook_keywords_checks_each_row_then_the_rules():
    with pytest.raises(OptionError) as raised:
        settings.check_hook_keywords({"max_steps": 2, "mode": "eval"})
    assert (raised.value.option, raised.value.value) == ("mode", "eval")
    with pytest.raises(OptionError) as raised:
        settings.check_hook_keywords({"max_dump_size": "lots"})
    assert raised.value.option == "max_dump_size"
    with pytest.raises(OptionError, match="not to the real NPU") as raised:
        settings.check_hook_keywords({"backend": "npu", "faults": {"a": "nan"}})
    assert raised.value.option == "faults"
    # the hook passes every keyword, defaults included: unset (None) or empty values are not given
    settings.check_hook_keywords({"backend": "npu", "faults": None, "emulate_profile": None, "initial_state": None,
                                  "max_steps": None, "max_dump_size": None, "mode": "auto"})
    settings.check_hook_keywords({"backend": "npu", "faults": {}})


def test_the_golden_rule_takes_backend_objects():
    from npu_dump_hook.backends import resolve_backend

    settings.check_combination({"backend": resolve_backend("golden"), "initial_state": "/b"})
    with pytest.raises(OptionError) as raised:
        settings.check_combination({"backend": resolve_backend("emulated"), "initial_state": "/b"})
    assert (raised.value.option, raised.value.rule) == (
        "initial_state", "is for the golden run, whose backend is reference, not emulated (backend=emulated)")


def test_the_hook_refuses_a_bad_combination_before_building_anything(tmp_path):
    from npu_dump_hook.hook import NpuDumpHook

    out = tmp_path / "out"
    with pytest.raises(OptionError, match="not to the real NPU") as raised:
        NpuDumpHook(output_dir=str(out), backend="npu", emulate_profile="ascend")
    assert raised.value.option == "emulate_profile" and not out.exists()
    with pytest.raises(OptionError) as raised:
        NpuDumpHook(output_dir=str(out), max_input_bytes=-1)
    assert raised.value.option == "max_input_bytes" and not out.exists()


def test_every_rows_check_accepts_its_default():
    """The hook checks every keyword as called, defaults included (check_hook_keywords)."""
    checked = [row for row in settings.rows() if row.check is not None]
    assert {"max_steps", "mode", "max_dump_size", "max_input_bytes"} <= {row.name for row in checked}
    assert [row.name for row in checked if row.check(row.default) is not None] == []
