"""Property tests: writer -> reader round trips, and mutated files fail only with our errors."""
import os
import struct
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_dump_hook.errors import FormatError
from npu_dump_hook.formats import dump_file
from npu_dump_hook.formats.dump_file import DumpFile, DumpTensor, KINDS, read_header, read_header_bytes, write_dump_file

DTYPES = ["<f2", "<f4", "<f8", "i1", "u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "?", "<c8", "<c16"]
FORMATS = ["ND", "NCHW", "NHWC", "HWCN", "NC1HWC0", "FRACTAL_NZ", "FRACTAL_Z"]
SETTINGS = dict(derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

names = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
shapes = st.lists(st.integers(0, 4), max_size=3)


@st.composite
def tensors(draw):
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = tuple(draw(shapes))
    raw = draw(st.binary(min_size=int(np.prod(shape)) * dtype.itemsize,
                         max_size=int(np.prod(shape)) * dtype.itemsize))
    array = np.frombuffer(raw, dtype=dtype).reshape(shape)
    return DumpTensor(
        array, format=draw(st.sampled_from(FORMATS)),
        original_shape=draw(st.one_of(st.none(), shapes)),
        original_name=draw(st.one_of(st.none(), names)),
        original_output_index=draw(st.integers(0, 2 ** 32 - 1)),
        sub_format=draw(st.integers(0, 2 ** 31 - 1)),
        address=draw(st.integers(0, 2 ** 64 - 1)),
    )


file_specs = st.fixed_dictionaries({
    "op_name": names,
    "outputs": st.lists(tensors(), max_size=3),
    "inputs": st.lists(tensors(), max_size=3),
    "buffers": st.lists(st.binary(max_size=16), max_size=2),
    "workspaces": st.lists(st.binary(max_size=16), max_size=2),
    "dump_time": st.integers(0, 2 ** 64 - 1),
    "attrs": st.dictionaries(names, names, max_size=2),
})


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz") / "dump"


@settings(max_examples=150, **SETTINGS)
@given(spec=file_specs)
def test_writer_reader_round_trip(scratch, spec):
    size = write_dump_file(scratch, **spec)
    with DumpFile.open(scratch, strict=True) as dump:
        assert dump.file_size == size and dump.version == "v2" and not dump.warnings
        assert (dump.op_name, dump.dump_time) == (spec["op_name"], spec["dump_time"])
        assert dump.summary()["attrs"] == spec["attrs"]
        for kind, written in (("output", spec["outputs"]), ("input", spec["inputs"])):
            assert len(dump.tensors(kind)) == len(written)
            for index, tensor in enumerate(written):
                info = dump.tensor(kind, index)
                assert info.shape == tensor.shape and info.original_shape == tensor.original_shape
                got = dump.array(kind, index)
                assert got.dtype == tensor.array.dtype and got.shape == tensor.array.shape
                assert got.tobytes() == tensor.array.tobytes()  # bitwise: NaN payloads included
                if kind == "output":
                    assert info.original_name == tensor.original_name
        for kind, blobs in (("buffer", spec["buffers"]), ("workspace", spec["workspaces"])):
            assert [dump.array(kind, i).tobytes() for i in range(len(blobs))] == blobs


def _seed_files():
    seeds = []
    for outputs, inputs, buffers in (
        ([np.arange(6, dtype=np.float32).reshape(2, 3)], [np.array([1, 2], dtype=np.int64)], [b"buf"]),
        ([DumpTensor(np.zeros((1, 1, 2, 2, 16), dtype=np.float16), format="NC1HWC0",
                     original_shape=[1, 2, 2, 3], original_name="x/y", original_format="NHWC")], [], []),
        ([DumpTensor(np.zeros((2, 1, 16, 16), dtype=np.float32), format="FRACTAL_NZ",
                     original_shape=[5, 20], original_name="m")], [np.array(True)], []),
    ):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "seed")
            write_dump_file(path, "op/name", outputs=outputs, inputs=inputs, buffers=buffers, dump_time=1)
            with open(path, "rb") as fileobj:
                seeds.append(fileobj.read())
    return seeds


SEEDS = _seed_files()

mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10 ** 6), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10 ** 6), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 10 ** 6), st.integers(0, 255)),
    st.tuples(st.just("prefix"), st.integers(0, 2 ** 64 - 1), st.just(0)),
    st.tuples(st.just("header_byte"), st.integers(0, 10 ** 6), st.integers(0, 255)),
)


def _mutate(data, mutations):
    data = bytearray(data)
    for kind, where, value in mutations:
        if not data:
            break
        if kind == "flip":
            data[where % len(data)] ^= value
        elif kind == "truncate":
            del data[where % len(data):]
        elif kind == "insert":
            data.insert(where % (len(data) + 1), value)
        elif kind == "prefix":
            data[:8] = struct.pack("<Q", where)
        else:  # overwrite a byte inside the header, where most structure lives
            header_len = min(struct.unpack("<Q", bytes(data[:8]).ljust(8, b"\0"))[0], len(data) - 8)
            if header_len > 0:
                data[8 + where % header_len] = value
    return bytes(data)


@settings(max_examples=400, **SETTINGS)
@given(seed=st.sampled_from(range(len(SEEDS))), mutations=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_files_fail_only_with_format_errors(scratch, seed, mutations):
    scratch.write_bytes(_mutate(SEEDS[seed], mutations))
    try:
        with DumpFile.open(scratch, strict=True) as dump:
            dump.summary()
            for kind in KINDS:
                for info in dump.tensors(kind):
                    dump.array(kind, info.index, raw=True)
                    try:
                        dump.array(kind, info.index, original_shape=True)
                    except FormatError:
                        pass
    except FormatError:
        pass  # DumpFileError (a FormatError) or a FormatError from the device-format conversion


def _outcome(read, *args):
    """What a header reader made of a file: its summary, or the error's type, rule and offset."""
    try:
        return read(*args).summary()
    except FormatError as exc:
        return type(exc).__name__, exc.rule, getattr(exc, "offset", None)


@settings(max_examples=400, **SETTINGS)
@given(seed=st.sampled_from(range(len(SEEDS))), mutations=st.lists(mutation, min_size=1, max_size=4),
       strict=st.booleans())
def test_reading_a_header_from_bytes_already_read_matches_reading_the_file(scratch, seed, mutations, strict):
    data = _mutate(SEEDS[seed], mutations)
    scratch.write_bytes(data)
    assert _outcome(read_header_bytes, scratch, data, len(data), strict) == _outcome(read_header, scratch, strict)


@settings(max_examples=600, **SETTINGS)
@given(seed=st.sampled_from(range(len(SEEDS))), mutations=st.lists(mutation, min_size=0, max_size=4),
       noise=st.binary(max_size=64))
def test_the_quick_header_check_never_accepts_what_the_full_walk_refuses(seed, mutations, noise):
    data = _mutate(SEEDS[seed], mutations)
    header_len = min(struct.unpack("<Q", data[:8].ljust(8, b"\0"))[0], max(len(data) - 8, 0))
    for header in (data[8:8 + header_len], noise, data[8:8 + header_len] + noise):
        if dump_file._quick_scan(header, 0, len(header)):
            dump_file._scan_dump_data(header, 0, len(header), 8)  # raises when the quick check was wrong


def _fields_of(header):
    return ([(t.dtype_name, t.shape, t.format_name, t.original_shape) for t in header.inputs],
            [(t.dtype_name, t.shape, t.format_name, t.original_shape) for t in header.outputs])


@settings(max_examples=400, **SETTINGS)
@given(seed=st.sampled_from(range(len(SEEDS))), mutations=st.lists(mutation, min_size=0, max_size=4),
       cut=st.integers(0, 64))
def test_quick_tensor_fields_say_what_the_reader_says_or_nothing(scratch, seed, mutations, cut):
    data = _mutate(SEEDS[seed], mutations)
    head = data[:max(len(data) - cut, 0)] if cut % 2 else data  # a head that may lack the header's end
    quick = dump_file.quick_tensor_fields(head, len(data))
    if quick is None:
        return
    scratch.write_bytes(data)
    header = read_header(scratch, strict=True)  # no error and no warning: strict refuses trailing bytes
    assert header.version == "v2" and not header.warnings
    assert quick == _fields_of(header)


def test_quick_tensor_fields_cover_every_seed_that_reads_cleanly(scratch):
    taken = 0
    for data in SEEDS:
        scratch.write_bytes(data)
        try:
            header = read_header(scratch, strict=True)
        except FormatError:
            continue
        quick = dump_file.quick_tensor_fields(data, len(data))
        if header.version == "v2" and not header.warnings and quick is not None:
            assert quick == _fields_of(header)
            taken += 1
    assert taken >= 2  # the common file takes the quick path
