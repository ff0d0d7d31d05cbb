"""backends: one protocol for the real NPU and the emulator; the user's choice resolved once."""

import pytest

from npu_dump_hook.backends import RealNpu, ReferenceOnly, golden_in_run, reference_default, resolve_backend
from npu_dump_hook.backends import GoldenOnly, golden_capture_default
from npu_dump_hook.constants import BACKEND_CHOICES, RECORDED_BACKENDS
from npu_dump_hook.emulator import EmulatedNpu
from npu_dump_hook.errors import BackendError, OptionError

PROTOCOL = ("name", "captures", "settles", "begin", "session_started", "write_step", "graph_dirs", "summary")


@pytest.mark.parametrize("backend", [RealNpu(), EmulatedNpu(), ReferenceOnly()], ids=["npu", "emulated", "reference"])
def test_both_backends_implement_the_protocol(backend):
    assert all(hasattr(backend, name) for name in PROTOCOL)
    assert backend.name in RECORDED_BACKENDS


def test_the_real_npu_waits_for_ge_and_never_writes(monkeypatch, tmp_path):
    npu = RealNpu()
    assert (npu.captures, npu.settles, npu.summary()) == (False, True, None)
    with pytest.raises(BackendError, match="writes its own dump"):
        npu.write_step(None, 0)
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(tmp_path))
    assert str(tmp_path) in npu.graph_dirs(0)


def test_the_emulator_captures_and_names_its_graph_folder(tmp_path):
    emulator = EmulatedNpu()
    assert (emulator.captures, emulator.settles, emulator.graph_dirs(0)) == (True, False, None)
    emulator.graph_file = str(tmp_path / "ge_proto_00000000_Build.txt")
    assert emulator.graph_dirs(0) == [str(tmp_path)]


def test_resolve_keeps_objects_and_maps_choices(npu_bridge_double):
    emulator = EmulatedNpu()
    assert resolve_backend(emulator) is emulator
    assert isinstance(resolve_backend("emulated"), EmulatedNpu)
    assert isinstance(resolve_backend("auto"), RealNpu)  # npu_bridge importable
    assert isinstance(resolve_backend("npu"), RealNpu)


def test_resolve_without_npu_bridge():
    assert isinstance(resolve_backend("auto"), EmulatedNpu)
    with pytest.raises(OptionError, match="needs npu_bridge"):
        resolve_backend("npu")
    with pytest.raises(OptionError) as info:
        resolve_backend("gpu")
    assert info.value.option == "backend" and all(choice in str(info.value) for choice in BACKEND_CHOICES)


def test_the_reference_backend_writes_nothing_and_wants_the_golden():
    reference = resolve_backend("reference")
    assert isinstance(reference, ReferenceOnly) and "reference" in BACKEND_CHOICES
    assert (reference.captures, reference.settles, reference.graph_dirs(0), reference.summary()) == (
        False, False, None, None)
    with pytest.raises(BackendError, match="writes no dump"):
        reference.write_step(None, 0)
    assert reference_default(reference) and golden_in_run(reference)


def test_reference_default_follows_the_backend():
    assert reference_default(EmulatedNpu()) and not reference_default(RealNpu())
    assert not reference_default(EmulatedNpu(profile="ascend"))  # NPU numerics: no golden in this run
    assert not reference_default(EmulatedNpu(faults={"op": "nan"}))


def test_profile_and_faults_reach_the_emulator_only():
    emulator = resolve_backend("emulated", "fp32", "ascend", {"op": "scale=1.05"})
    assert (emulator.profile, emulator.faults, emulator.golden_in_run) == ("ascend", {"op": "scale=1.05"}, False)
    assert resolve_backend("auto", profile="exact").profile == "exact"  # no npu_bridge: the emulator
    for backend, profile, faults, option in (("reference", "ascend", None, "emulate_profile"),
                                             ("reference", None, {"op": "nan"}, "faults"),
                                             (EmulatedNpu(), "exact", None, "emulate_profile"),
                                             ("emulated", "fast", None, "emulate_profile"),
                                             ("emulated", None, ["op"], "faults")):
        with pytest.raises(OptionError) as info:
            resolve_backend(backend, "fp32", profile, faults)
        assert info.value.option == option


def test_profile_is_refused_on_the_real_npu(npu_bridge_double):
    with pytest.raises(OptionError) as info:
        resolve_backend("npu", "fp32", "ascend")
    assert info.value.option == "emulate_profile" and "emulated backend only" in str(info.value)


@pytest.mark.parametrize("typed", ["golden", "reference"])
def test_golden_and_its_alias_reference_resolve_to_the_golden_backend(typed):
    golden = resolve_backend(typed)
    assert isinstance(golden, GoldenOnly) and golden.name == "reference"  # bundle.json's recorded name
    assert golden_capture_default(golden) and golden.golden_only
    with pytest.raises(OptionError) as info:
        resolve_backend(typed, "fp32", "ascend")
    assert info.value.option == "emulate_profile"


def test_the_older_names_are_the_golden_ones():
    assert ReferenceOnly is GoldenOnly and reference_default is golden_capture_default
