"""A golden run refuses a hostile ``data/inputs/`` when it starts, as it does a hostile checkpoint
(issue #20, found by hand in the #21 tryout).

A bundle.json ``inputs`` entry escaping the bag, a symlinked input file or an input listed without
a sha256 used to pass the hook's construction and fail only inside the script's captured step,
with a traceback through the script; like the checkpoint's, they are now an OptionError
(``initial_state``) from ``NpuDumpHook(initial_state=...)``, before anything trains.
"""
import hashlib
import json
import os

import pytest

from npu_dump_hook import NpuDumpHook, OptionError

from helpers.bundles import list_bundle_json


def _entry(kind, path, payload):
    return {"kind": kind, "path": path, "size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}


@pytest.mark.parametrize("damage, rule", [("escape", "escapes"), ("symlink", "is a symlink"),
                                          ("null_sha256", "not verifiable"), ("manifest", "inputs")])
def test_the_hook_refuses_hostile_inputs_before_training(tmp_path, damage, rule):
    bundle = tmp_path / "b"
    for folder in ("init", "inputs"):
        (bundle / "data" / folder).mkdir(parents=True)
    index, value = b"index bytes", b"npy bytes"
    (bundle / "data" / "init" / "model.ckpt.index").write_bytes(index)
    (bundle / "data" / "inputs" / "0000_x_0.npy").write_bytes(value)
    entry = _entry("inputs", "inputs/0000_x_0.npy", value)
    tensor = {"name": "x:0", "file": "inputs/0000_x_0.npy", "dtype": "float32", "shape": [1],
              "sha256": entry["sha256"], "source": "feed", "op_type": "Placeholder"}
    if damage == "escape":
        entry["path"] = "inputs/../../victim.npy"  # files[] leaves the bag (the manifest still looks fine)
    elif damage == "symlink":
        (tmp_path / "victim.npy").write_bytes(value)
        os.unlink(str(bundle / "data" / "inputs" / "0000_x_0.npy"))
        os.symlink(str(tmp_path / "victim.npy"), str(bundle / "data" / "inputs" / "0000_x_0.npy"))
    elif damage == "null_sha256":
        entry["sha256"] = None
    else:
        tensor["file"] = "../victim.npy"
    inputs = {"kept": True, "step": 0, "tensors": [tensor], "total_bytes": len(value), "reason": None,
              "max_input_bytes": 1 << 20}
    doc = {"backend": "emulated", "run": {"captured_step": 0}, "created": "now", "inputs": inputs,
           "files": [_entry("init", "init/model.ckpt.index", index), entry]}
    (bundle / "data" / "bundle.json").write_text(json.dumps(doc))
    list_bundle_json(bundle)
    with pytest.raises(OptionError, match=rule) as info:
        NpuDumpHook(output_dir=str(tmp_path / "out"), initial_state=str(bundle))
    assert info.value.option == "initial_state"
    assert not (tmp_path / "out").exists() or not os.listdir(str(tmp_path / "out"))
