import os
import pickle

import pytest

from npu_dump_hook import DumpOptions, OptionError


def test_defaults_mirror_dumpconfig():
    opts = DumpOptions()
    assert (opts.enable_dump, opts.dump_path, opts.dump_step, opts.dump_mode, opts.dump_layer,
            opts.dump_data, opts.enable_dump_debug, opts.dump_debug_mode) == (
        False, None, None, "output", None, "tensor", False, "all")
    assert not opts.enabled


@pytest.mark.parametrize("step", ["0", "0|5|10", "0|3-5|10", "10-20", "7|100-101"])
def test_valid_dump_steps(tmp_path, step):
    assert DumpOptions(enable_dump=True, dump_path=str(tmp_path), dump_step=step).dump_step == step


@pytest.mark.parametrize("step,rule", [
    ("0||5", "must match"), ("-5", "must match"), ("0|", "must match"), (" 1", "must match"),
    ("1-2-3", "must match"), ("a", "must match"), ("5-3", "start < end"), ("4-4", "start < end"),
    ("|".join(str(i) for i in range(101)), "at most 100 items"),
])
def test_invalid_dump_steps_name_option_value_rule(tmp_path, step, rule):
    with pytest.raises(OptionError) as info:
        DumpOptions(enable_dump=True, dump_path=str(tmp_path), dump_step=step)
    assert info.value.option == "dump_step"
    assert info.value.value == step
    assert rule in str(info.value) and "dump_step" in str(info.value)


def test_hundred_items_allowed(tmp_path):
    step = "|".join(str(i) for i in range(100))
    assert DumpOptions(enable_dump=True, dump_path=str(tmp_path), dump_step=step).dumps_step(99)


def test_int_dump_step_becomes_string(tmp_path):
    assert DumpOptions(enable_dump=True, dump_path=str(tmp_path), dump_step=3).dump_step == "3"


@pytest.mark.parametrize("field,value", [
    ("dump_mode", "both"), ("dump_data", "tensors"), ("dump_debug_mode", "overflow"),
])
def test_enumerations(tmp_path, field, value):
    with pytest.raises(OptionError, match=field + ".*must be one of"):
        DumpOptions(enable_dump=True, dump_path=str(tmp_path), **{field: value})


def test_flags_must_be_bool(tmp_path):
    with pytest.raises(OptionError, match="enable_dump.*bool"):
        DumpOptions(enable_dump="True", dump_path=str(tmp_path))


def test_dump_and_debug_together_rejected(tmp_path):
    with pytest.raises(OptionError, match="cannot both be on"):
        DumpOptions(enable_dump=True, enable_dump_debug=True, dump_path=str(tmp_path))


@pytest.mark.parametrize("flag", ["enable_dump", "enable_dump_debug"])
def test_dump_path_required(flag):
    with pytest.raises(OptionError) as info:
        DumpOptions(**{flag: True})
    assert info.value.option == "dump_path" and flag in str(info.value)


def test_dump_path_created_with_parents_and_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    opts = DumpOptions(enable_dump=True, dump_path="a/b/c")
    assert opts.dump_path == os.path.join(str(tmp_path), "a", "b", "c")
    assert os.path.isdir(opts.dump_path)


def test_dump_path_that_is_a_file(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(OptionError, match="not a directory"):
        DumpOptions(enable_dump=True, dump_path=str(target))


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_dump_path_not_writable(tmp_path):
    target = tmp_path / "ro"
    target.mkdir()
    target.chmod(0o500)
    with pytest.raises(OptionError, match="readable and writable"):
        DumpOptions(enable_dump=True, dump_path=str(target))


def test_validation_order_enum_before_path():
    # dump_path is missing too, but the enum rule comes first in the documented order.
    with pytest.raises(OptionError) as info:
        DumpOptions(enable_dump=True, dump_mode="bad")
    assert info.value.option == "dump_mode"


def test_step_selection(tmp_path):
    opts = DumpOptions(enable_dump=True, dump_path=str(tmp_path), dump_step="0|3-5|10")
    assert [s for s in range(12) if opts.dumps_step(s)] == [0, 3, 4, 5, 10]
    assert DumpOptions().dumps_step(123)


def test_layers_split():
    assert DumpOptions(dump_layer="a/b  c").layers == ("a/b", "c")


def test_from_env(tmp_path):
    env = {"NPU_DUMP_ENABLE": "true", "NPU_DUMP_PATH": str(tmp_path), "NPU_DUMP_STEP": "0|2",
           "NPU_DUMP_MODE": "all", "NPU_DUMP_LAYER": "a b", "NPU_DUMP_DATA": "stats"}
    opts = DumpOptions.from_env(env)
    assert (opts.enable_dump, opts.dump_path, opts.dump_step, opts.dump_mode, opts.layers, opts.dump_data) == (
        True, str(tmp_path), "0|2", "all", ("a", "b"), "stats")


@pytest.mark.parametrize("env,option", [
    ({"NPU_DUMP_ENABLE": "maybe"}, "NPU_DUMP_ENABLE"),
    ({"NPU_DUMP_ENABLE": "1"}, "NPU_DUMP_PATH"),  # errors from the environment name the variable
    ({"NPU_DUMP_ENABLE": "1", "NPU_DUMP_PATH": "/tmp", "NPU_DUMP_STEP": "1-1"}, "NPU_DUMP_STEP"),
])
def test_from_env_rejects_like_constructor(env, option):
    with pytest.raises(OptionError) as info:
        DumpOptions.from_env(env)
    assert info.value.option == option


def test_option_error_pickles(tmp_path):
    with pytest.raises(OptionError) as info:
        DumpOptions(enable_dump=True, dump_path=str(tmp_path), dump_step="9-1")
    clone = pickle.loads(pickle.dumps(info.value))
    assert type(clone) is OptionError and isinstance(clone, ValueError)
    assert (clone.option, clone.value, clone.rule, str(clone)) == (
        info.value.option, info.value.value, info.value.rule, str(info.value))


def test_frozen():
    with pytest.raises(Exception):
        DumpOptions().enable_dump = True


def test_a_data_dump_variable_alone_switches_the_dump_on(tmp_path):
    env = {"NPU_DUMP_MODE": "all", "NPU_DUMP_PATH": str(tmp_path)}
    options = DumpOptions.from_env(env)
    assert options.enable_dump and options.dump_mode == "all"
    assert DumpOptions.from_env(dict(env, NPU_DUMP_ENABLE="0")).enable_dump is False  # said explicitly
    debug = DumpOptions.from_env({"NPU_DUMP_DEBUG_MODE": "aicore_overflow", "NPU_DUMP_PATH": str(tmp_path)})
    assert debug.enable_dump_debug and not debug.enable_dump


def test_errors_from_the_environment_name_the_variable(tmp_path):
    with pytest.raises(OptionError) as info:
        DumpOptions.from_env({"NPU_DUMP_MODE": "everything", "NPU_DUMP_PATH": str(tmp_path)})
    assert info.value.option == "NPU_DUMP_MODE" and "NPU_DUMP_MODE='everything'" in str(info.value)
    with pytest.raises(OptionError) as info:
        DumpOptions.from_env({"NPU_DUMP_STEP": "1-0"})  # implies the dump, which needs a path... and a valid step
    assert info.value.option.startswith("NPU_DUMP_")


def test_dump_settings_with_dumping_off_warn_at_construction(tmp_path, caplog):
    with caplog.at_level("WARNING", logger="npu_dump_hook.options"):
        DumpOptions(dump_path=str(tmp_path), dump_mode="all")
    assert "dump_path, dump_mode set but enable_dump and enable_dump_debug are off" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="npu_dump_hook.options"):
        DumpOptions()
    assert caplog.text == ""


def test_hook_with_only_npu_dump_mode_set_dumps_into_its_run_folder(in_tmp_cwd, monkeypatch):
    from npu_dump_hook import NpuDumpHook

    monkeypatch.setenv("NPU_DUMP_MODE", "all")
    hook = NpuDumpHook(None, output_dir="out")
    assert hook.options.enable_dump and hook.options.dump_mode == "all"
    assert hook.options.dump_path == hook.layout.dump_dir
