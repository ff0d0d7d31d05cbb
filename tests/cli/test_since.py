"""``--since``: ISO 8601, epoch seconds and GE time folder names, and the errors for the rest."""
import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_dump_hook.cli._since import parse_since
from npu_dump_hook.errors import OptionError

@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-11-29T07:30:00", datetime.datetime(2026, 11, 29, 7, 30).timestamp()),
        ("2026-11-29 07:30", datetime.datetime(2026, 11, 29, 7, 30).timestamp()),
        ("2026-11-29", datetime.datetime(2026, 11, 29).timestamp()),
        ("2026-11-29T07:30:00.25", datetime.datetime(2026, 11, 29, 7, 30).timestamp() + 0.25),
        ("2026-11-29T07:30:00+08:00", 1795908600.0),
        ("2026-11-29T07:30:00+0800", 1795908600.0),
        ("2026-11-28T23:30:00Z", 1795908600.0),
        ("2026-11-28T20:30:00-03:00", 1795908600.0),
        ("1796081400", 1796081400.0),
        ("1796081400.5", 1796081400.5),
        (" 1796081400 ", 1796081400.0),
        ("20261129073000", datetime.datetime(2026, 11, 29, 7, 30).timestamp()),
    ],
)
def test_parse_since_forms(text, expected):
    assert parse_since(text) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    "text, rule",
    [
        ("", "expected ISO 8601"),
        ("yesterday", "expected ISO 8601"),
        ("2026-13-01T00:00:00", "not a valid date/time"),
        ("2026-11-29T25:00:00", "not a valid date/time"),
        ("2026-11-29T07:30:00+24:00", "not a valid date/time"),
        ("20261399073000", "YYYYMMDDhhmmss is not a calendar time"),
        ("20261129", "epoch seconds must be between 946684800 (2000-01-01)"),
        # Once an OverflowError out of datetime: 20 digits are far past year 9999.
        ("99999999999999999999", "epoch seconds must be between 946684800 (2000-01-01) and 253402300799"),
        ("-5", "expected ISO 8601"),
        ("nan", "expected ISO 8601"),
        ("2026-11-29T07:30:00.1234567", "expected ISO 8601"),
    ],
)
def test_parse_since_errors(text, rule):
    with pytest.raises(OptionError) as info:
        parse_since(text)
    assert info.value.option == "--since"
    assert info.value.value == text
    assert rule in info.value.rule


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.integers(min_value=946684800, max_value=4102444800))
def test_parse_since_time_folder_round_trip(epoch):
    # A GE time folder named at local time t parses back to t's whole second.
    name = datetime.datetime.fromtimestamp(epoch).strftime("%Y%m%d%H%M%S")
    back = parse_since(name)
    assert datetime.datetime.fromtimestamp(back).strftime("%Y%m%d%H%M%S") == name
    assert parse_since(str(epoch)) == float(epoch)
