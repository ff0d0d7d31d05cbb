"""``verify`` cross-checks ``data/inputs/*.npy`` against bundle.json's ``inputs`` manifest (issue #21).

Each bundle here is written by the bundle writer itself, so its BagIt manifests and files[]
agree with the files: only the cross-check can see that a file does not hold what the
manifest says (a bundle rewritten after its values were changed). One synthetic bundle per
case, no TensorFlow: the values are hashed and stored as the hook does
(``array_digest``, ``storable``, ``np.save(allow_pickle=False)``).
"""
import io
import struct

import numpy as np
import pytest

from npu_dump_hook.bundle import verify_bundle
from npu_dump_hook.bundle._input_files import MAX_NPY_HEADER_BYTES
from npu_dump_hook.cli import main
from npu_dump_hook.train.fingerprints import array_digest
from npu_dump_hook.train.inputs import input_file_name, storable

from helpers.bundles import make_run, write

X = np.arange(12, dtype=np.float32).reshape(4, 3)
WORDS = np.array([b"ab", b"", b"xyz\x00"], dtype=object)
FILE = "data/inputs/" + input_file_name(0, "x:0")


class _Marker(object):
    """Unpickling it writes ``path``: proof that verify never unpickles a payload."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _bundle(tmp_path, stored_x=None, raw_x=None):
    """A bundle whose manifest describes X and WORDS; ``data/inputs/`` holds ``stored_x`` (np.save)
    or the bytes ``raw_x`` in X's place."""
    folder = tmp_path / "inputs"
    folder.mkdir()
    tensors = []
    for number, (name, value, source) in enumerate((("x:0", X, "feed"), ("text:0", WORDS, "iterator"))):
        entry = dict(array_digest(value), name=name, source=source, op_type="Placeholder",
                     file="inputs/" + input_file_name(number, name))
        stored = (stored_x if stored_x is not None else X) if number == 0 else storable(value)[0]
        with open(str(folder / input_file_name(number, name)), "wb") as handle:
            if number == 0 and raw_x is not None:
                handle.write(raw_x)
            else:
                np.save(handle, stored, allow_pickle=False)
        tensors.append(entry)
    manifest = {"step": 0, "max_input_bytes": 1 << 20, "total_bytes": X.nbytes + 6, "kept": True, "reason": None,
                "tensors": tensors}
    dest = tmp_path / "bundle"
    write(dest, make_run(tmp_path / "run"), inputs_dir=str(folder), inputs=manifest)
    return str(dest)


def _npy_bytes(array, **save):
    buffer = io.BytesIO()
    np.save(buffer, array, **save)
    return buffer.getvalue()


def test_untouched_inputs_verify(tmp_path):
    assert verify_bundle(_bundle(tmp_path)) == []


@pytest.mark.parametrize("case, kind, rule", [
    ("values", "changed", "its values' sha256 "),
    ("shape", "changed", "shape [3, 4] in its .npy header, inputs.tensors[0].shape [4, 3] in bundle.json"),
    ("dtype", "changed", "dtype float64 in its .npy header, inputs.tensors[0].dtype 'float32' in bundle.json"),
    ("extra_bytes", "changed", "bytes, its header's dtype and shape make"),
    ("not_npy", "unparsable", "no .npy magic bytes"),
    ("object", "unparsable", "object arrays need pickle: not read"),
    ("long_header", "unparsable", "over the {} a .npy header may have".format(MAX_NPY_HEADER_BYTES)),
])
def test_an_input_file_that_disagrees_with_the_manifest_fails_verify(tmp_path, capsys, case, kind, rule):
    marker = tmp_path / "unpickled"
    raw = {"values": None, "shape": None, "dtype": None,
           "extra_bytes": _npy_bytes(X) + b"\x00" * 4,
           "not_npy": b"x,y\n1,2\n",
           "object": _npy_bytes(np.array([_Marker(str(marker))], dtype=object), allow_pickle=True),
           "long_header": b"\x93NUMPY\x02\x00" + struct.pack("<I", 60000) + b" " * 60000}[case]
    stored = {"values": X + 1, "shape": X.reshape(3, 4), "dtype": X.astype(np.float64)}.get(case)
    path = _bundle(tmp_path, stored_x=stored, raw_x=raw)
    problems = verify_bundle(path)
    assert [(p.kind, p.path) for p in problems] == [(kind, FILE)], problems
    assert rule in problems[0].detail, problems[0].detail
    assert not marker.exists()  # nothing unpickled
    assert main(["verify", "-q", path]) == 1
    shown = capsys.readouterr()
    assert FILE in shown.out + shown.err


def test_a_fortran_order_input_is_checked_by_header_and_size(tmp_path):
    """A value the script fed in Fortran order is stored so: its hash covers the C-order bytes,
    which verify does not rebuild (no array loaded); header and size still agree."""
    assert verify_bundle(_bundle(tmp_path, stored_x=np.asfortranarray(X))) == []
