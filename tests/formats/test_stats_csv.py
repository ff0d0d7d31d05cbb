"""Stats CSV (dump_data=stats) reading, writing and statistics (reference §3.2)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_dump_hook.errors import StatsFormatError
from npu_dump_hook.formats.stats_csv import (
    STATS_HEADER,
    StatsRow,
    compute_stats,
    format_stats_csv,
    parse_stats_text,
    read_stats_csv,
    write_stats_csv,
)

DEFAULT_HEADER = (
    b"Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,Avg Value,Count,"
    b"Nan Count,Negative Inf Count,Positive Inf Count\n"
)


def test_default_header_golden(tmp_path):
    path = tmp_path / "Conv2D.conv1.1.2.1700000000123456.csv"
    path.write_bytes(
        DEFAULT_HEADER
        + b"Input,0,2048,DT_FLOAT16,NC1HWC0,1x1x4x4x16,3.5,-1,0.25,256,0,0,0\n"
        + b"Input,1,4,DT_INT8,-,-,,,,,,,\n"
        + b"Output,0,2048,-,NC1HWC0,1x1x4x4x16,nan,-inf,1e+06,256,3,1,2\r\n"
    )
    parsed = read_stats_csv(path)
    assert parsed.variant == "default"
    assert parsed.columns == STATS_HEADER
    first, second, third = parsed.rows
    assert first == StatsRow("Input", 0, 2048, "DT_FLOAT16", "NC1HWC0", (1, 1, 4, 4, 16), 3.5, -1.0, 0.25, 256, 0, 0, 0)
    assert second == StatsRow("Input", 1, 4, "DT_INT8", None, ())
    assert third.data_type is None
    assert math.isnan(third.max_value) and third.min_value == -math.inf and third.avg_value == 1e6
    assert (third.count, third.nan_count, third.negative_inf_count, third.positive_inf_count) == (256, 3, 1, 2)


def test_host_header_variant_with_count_after_shape_na_and_l2norm():
    data = (
        b"Input/Output,Index,Data Size,Data Type,Format,Shape,Count,Max Value,Nan Count,l2norm\n"
        b"Output,0,64,UNKNOW,ND,4x4,16,NA,0,5.65685\n"
    )
    parsed = parse_stats_text(data, "x.csv")
    assert parsed.variant == "host"
    (row,) = parsed.rows
    assert row == StatsRow("Output", 0, 64, None, "ND", (4, 4), None, None, None, 16, 0, None, None, 5.65685)


def test_host_header_with_no_items_and_no_rows():
    parsed = parse_stats_text(b"Input/Output,Index,Data Size,Data Type,Format,Shape,Count\n")
    assert parsed.variant == "host" and parsed.rows == ()


@pytest.mark.parametrize(
    "data, rule, offset",
    [
        (b"", "empty file: expected the header line", 0),
        (b"Input/Output,Index\n", "line 1: header is neither", 0),
        (b"Input/Output,Index,Data Size,Data Type,Format,Shape,Count,Min Value,Max Value\n", "line 1: header", 0),
        (b"Input/Output,Index,Data Size,Data Type,Format,Shape,Count,Max Value,Max Value\n", "line 1: header", 0),
        (DEFAULT_HEADER + b"Input,0,1\n", "line 2: 3 cells, the header has 13", 136),
        (DEFAULT_HEADER + b"In,0,1,-,-,-,,,,,,,\n", "line 2 column 'Input/Output': expected Input or Output (cell 'In')", 136),
        (DEFAULT_HEADER + b"Input,-1,1,-,-,-,,,,,,,\n", "line 2 column 'Index': expected an unsigned integer", 142),
        (DEFAULT_HEADER + b"Input,0,1,-,-,2x,,,,,,,\n", "line 2 column 'Shape': expected dims joined by 'x'", 150),
        (DEFAULT_HEADER + b"Input,0,1,-,-,-,1.2.3,,,,,,\n", "line 2 column 'Max Value': expected a number", 152),
        (DEFAULT_HEADER + b"Input,0,1,-,-,-,,,,1.5,,,\n", "line 2 column 'Count': expected an unsigned integer count", 155),
        (DEFAULT_HEADER + b"Input,0,1,DT FLOAT,-,-,,,,,,,\n", "line 2 column 'Data Type': expected a type", 146),
        (DEFAULT_HEADER + b"Input,0,1,-,-,-,\xc3\xa9,,,,,,\n", "line 2: not ASCII", 152),
    ],
)
def test_malformed(data, rule, offset):
    with pytest.raises(StatsFormatError) as info:
        parse_stats_text(data, "s.csv")
    assert info.value.path == "s.csv"
    assert rule in info.value.rule
    assert info.value.offset == offset


def test_default_header_length_used_in_offsets():
    assert len(DEFAULT_HEADER) == 136


def test_writer_prints_like_cxx_ostream(tmp_path):
    rows = [
        StatsRow("Input", 0, 2048, "DT_FLOAT", "NC1HWC0", (1, 1, 4, 4, 16), 1234567.0, -0.000123456789, 1.0 / 3, 512, 0, 0, 0),
        StatsRow("Output", 0, 16, "DT_INT8", "ND", (16,), 127, -128, 0.5, 16, 0, 0, 0),
        StatsRow("Output", 1, 8, None, None, (), float("nan"), float("-inf"), float("inf"), 2, 1, 1, 0),
        StatsRow("Output", 2, 8, "DT_STRING", "ND", (1,)),
    ]
    path = tmp_path / "s.csv"
    write_stats_csv(path, rows)
    assert path.read_bytes() == DEFAULT_HEADER + (
        b"Input,0,2048,DT_FLOAT,NC1HWC0,1x1x4x4x16,1.23457e+06,-0.000123457,0.333333,512,0,0,0\n"
        b"Output,0,16,DT_INT8,ND,16,127,-128,0.5,16,0,0,0\n"
        b"Output,1,8,-,-,-,nan,-inf,inf,2,1,1,0\n"
        b"Output,2,8,DT_STRING,ND,1,,,,,,,\n"
    )


_FLOATS = st.one_of(st.none(), st.integers(-(10**6), 10**6).map(float), st.sampled_from([0.5, -2.25, math.inf, -math.inf]))
_COUNTS = st.one_of(st.none(), st.integers(0, 2**64 - 1))


@st.composite
def rows(draw):
    return StatsRow(
        draw(st.sampled_from(["Input", "Output"])),
        draw(st.integers(0, 1000)),
        draw(st.integers(0, 2**40)),
        draw(st.sampled_from([None, "DT_FLOAT", "DT_FLOAT16", "DT_BF16"])),
        draw(st.sampled_from([None, "ND", "NC1HWC0", "FRACTAL_NZ"])),
        tuple(draw(st.lists(st.integers(0, 99999), max_size=5))),
        draw(_FLOATS),
        draw(_FLOATS),
        draw(_FLOATS),
        draw(_COUNTS),
        draw(_COUNTS),
        draw(_COUNTS),
        draw(_COUNTS),
    )


@settings(max_examples=150, derandomize=True, deadline=None)
@given(st.lists(rows(), max_size=6))
def test_write_read_round_trip(values):
    text = format_stats_csv(values).encode("ascii")
    assert parse_stats_text(text).rows == tuple(values)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.binary(max_size=80))
def test_reader_raises_only_stats_format_error(tail):
    try:
        parse_stats_text(DEFAULT_HEADER + tail, "f.csv")
    except StatsFormatError as exc:
        assert exc.path == "f.csv" and exc.offset is not None


def test_compute_stats_float_with_non_finite_values():
    values = np.array([1.0, -2.0, np.nan, np.inf, -np.inf, 4.0], dtype=np.float32)
    stats = compute_stats(values)
    assert stats == {
        "max_value": 4.0,
        "min_value": -2.0,
        "avg_value": 1.0,
        "count": 6,
        "nan_count": 1,
        "negative_inf_count": 1,
        "positive_inf_count": 1,
    }


def test_compute_stats_int8_gives_integer_extremes_and_unsupported_gives_none():
    stats = compute_stats(np.array([[-3, 7], [1, 3]], dtype=np.int8))
    assert (stats["max_value"], stats["min_value"], stats["avg_value"], stats["count"]) == (7, -3, 2.0, 4)
    assert isinstance(stats["max_value"], int)
    assert set(compute_stats(np.zeros(2, np.complex64)).values()) == {None}


def test_compute_stats_all_nan():
    stats = compute_stats(np.full(3, np.nan, np.float16))
    assert math.isnan(stats["max_value"]) and stats["nan_count"] == 3 and stats["count"] == 3
