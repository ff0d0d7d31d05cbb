"""formats.npy's one .npy header reader (used by compare's golden side, the capture's read_npy and
verify's input check): what numpy's own reader says for every layout np.save writes, inert and
size-capped, a FormatError naming the rule for a bad header, layouts parsed once."""
import io
import struct

import numpy as np
import pytest

from npu_dump_hook.compare._golden import load_golden
from npu_dump_hook.errors import FormatError
from npu_dump_hook.formats.npy import (MAX_NPY_HEADER_BYTES, npy_header_size, parse_npy_header, read_npy,
                                       read_npy_header)


class _Marker(object):
    """Unpickling it writes ``path``: proof that no reader unpickles anything."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _saved(array, version=None):
    buffer = io.BytesIO()
    if version is None:
        np.save(buffer, array, allow_pickle=True)
    else:
        np.lib.format.write_array(buffer, array, version=version)
    return buffer.getvalue()


def _numpy_reads_header(handle, version):
    """numpy's own header reader: public for versions 1.0 and 2.0; 3.0 only through its private
    function, which numpy 2 moved from ``numpy.lib.format`` to ``numpy.lib._format_impl``."""
    public = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    if version in public:
        return public[version](handle)
    private = getattr(np.lib.format, "_read_array_header", None)
    if private is None:
        from numpy.lib import _format_impl
        private = _format_impl._read_array_header
    return private(handle, version)


@pytest.mark.parametrize("array, version", [
    (np.arange(12, dtype=np.float32).reshape(3, 4), None), (np.float16(1.5).reshape(()), None),
    (np.zeros((0, 7), np.int64), None), (np.asfortranarray(np.ones((2, 3), np.float64)), None),
    (np.arange(4, dtype=">i4"), None), (np.array(["ab", "c"]), None), (np.ones((5,), np.uint8), (2, 0)),
    (np.ones((2, 2), np.bool_), (3, 0))], ids=["2d", "scalar", "empty", "fortran", "big-endian", "unicode",
                                               "version-2", "version-3"])
def test_the_header_is_what_numpy_reads(array, version):
    data = _saved(array, version)
    handle = io.BytesIO(data)
    header = read_npy_header(handle, "a.npy")
    theirs = io.BytesIO(data)
    major, minor = np.lib.format.read_magic(theirs)
    shape, fortran_order, dtype = _numpy_reads_header(theirs, (major, minor))
    assert (header.dtype, header.shape, header.fortran_order) == (dtype, shape, fortran_order)
    assert header.offset == theirs.tell() == handle.tell()  # left at the values
    assert header.count == array.size and header.nbytes == array.nbytes == len(data) - header.offset
    assert parse_npy_header(data[:npy_header_size(data[:12])]) == header


def test_a_header_in_another_layout_is_read_as_a_literal():
    text = "{'shape': (3, 2), 'fortran_order': False, 'descr': '<i2'}"  # not np.save's order
    body = text + " " * 5 + "\n"
    header = parse_npy_header(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(body)) + body.encode("latin1"))
    assert (header.dtype, header.shape, header.offset, header.nbytes) == (np.dtype("<i2"), (3, 2), 10 + len(body), 12)


def _with_text(text, version=1):
    body = text.encode("latin1") + b"\n"
    field = struct.pack("<H" if version == 1 else "<I", len(body))
    return b"\x93NUMPY" + bytes([version, 0]) + field + body


@pytest.mark.parametrize("data, rule", [
    (b"x,y\n1,2\n", "no .npy magic bytes"),
    (b"\x93NUMPY\x04\x00\x10\x00" + b" " * 16, ".npy version 4 is not 1, 2 or 3"),
    (b"\x93NUMPY\x02\x00" + struct.pack("<I", 60000) + b" " * 60000,
     "a header of 60000 bytes, over the {} a .npy header may have".format(MAX_NPY_HEADER_BYTES)),
    (_with_text("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }")[:-4], "the .npy header is cut off"),
    (_with_text("__import__('os').system('true')"), "its .npy header is not a Python literal"),
    (_with_text("{'descr': '<f4', 'shape': (2,)}"), "not a dict of descr (text), fortran_order and shape"),
    (_with_text("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}"), "not a dict of descr"),
    (_with_text("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}"), "not a dict of descr"),
    (_with_text("{'descr': 'nonsense', 'fortran_order': False, 'shape': (2,), }"), "is not a dtype"),
    (_with_text("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4611686018427387904), }"),
     "in the .npy header needs more than"),
], ids=["no-magic", "version", "over-the-cap", "cut-off", "code", "missing-key", "negative-dim", "int-order",
        "bad-descr", "too-large"])
def test_a_bad_header_names_the_rule(data, rule):
    with pytest.raises(FormatError) as caught:
        read_npy_header(io.BytesIO(data), "bad.npy")
    assert rule in caught.value.rule and str(caught.value).startswith("bad.npy"), str(caught.value)


def test_an_object_array_is_refused_never_unpickled(tmp_path):
    marker = tmp_path / "unpickled"
    data = _saved(np.array([_Marker(str(marker))], dtype=object))
    with pytest.raises(FormatError, match="object arrays need pickle: not read"):
        read_npy_header(io.BytesIO(data), "o.npy")
    path = str(tmp_path / "o.npy")
    with open(path, "wb") as handle:
        handle.write(data)
    for read in (read_npy, load_golden):  # numpy's refusal (allow_pickle=False), not a pickle load
        with pytest.raises(ValueError):
            read(path)
    assert not marker.exists()


def test_layouts_are_parsed_once_per_header():
    data = _saved(np.zeros((3, 5, 7), np.float32))
    head = data[:npy_header_size(data[:12])]
    assert parse_npy_header(head) is parse_npy_header(bytes(bytearray(head)))  # cached by the bytes


@pytest.mark.parametrize("array", [np.asfortranarray(np.arange(6.0).reshape(2, 3)), np.arange(5, dtype=">f8"),
                                   np.arange(300000, dtype=np.float32).reshape(600, 500)],
                         ids=["fortran", "big-endian", "mapped"])
def test_the_golden_reader_gives_what_np_load_gives(tmp_path, array):
    path = str(tmp_path / "g.npy")
    np.save(path, array)
    for buffer in (None, bytearray(1 << 16)):
        got = load_golden(path, buffer)
        assert got.dtype == array.dtype and got.shape == array.shape
        np.testing.assert_array_equal(got, array)
