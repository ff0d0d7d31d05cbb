"""Hostile and fuzzed GE graph text: the scanner (``iter_graphs``), the full parse (``parse_model``)
and the msaccucmp JSON (``to_msaccucmp_json``) let only the package's errors escape, refuse deep
nesting with the file, line and limit, and cost memory in proportion to the input, time linear in it.

Reproductions (issue 11): 300+ nested blocks raised RecursionError from text_format; 10 MB of
spaces cost 1.47 GB in ``parse_model``; the scanner's tokenizer kept ~150 bytes per repetition of
its blank/comment and string regexes (3.3M comment lines: 1.3 GB; a 10 MB string of escapes:
810 MB). Peak memory is RSS growth in a forked child of a fresh interpreter (protobuf's C
allocations count), as in test_fuzz_readers. Fixed budget: derandomized, no example database.
"""
import os
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import forked_rss, fuzz_outcomes, timing
from npu_dump_hook.errors import GraphFormatError
from npu_dump_hook.formats import ge_graph, ge_text

DATA = os.path.join(os.path.dirname(__file__), os.pardir, "data", "formats", "ge")
GOLDEN = os.path.join(DATA, "ge_proto_00000007_graph_1_Build.txt")
MB = 1000 * 1000
MIB = 1024 * 1024
FUZZ = dict(deadline=None, derandomize=True, database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                   HealthCheck.function_scoped_fixture])
OUTCOMES = fuzz_outcomes.new_tally()


def golden_bytes():
    with open(GOLDEN, "rb") as handle:
        return handle.read()


def write(folder, data, name="ge_proto_00000001_graph_1_Build.txt"):
    path = os.path.join(str(folder), name)
    with open(path, "wb") as handle:
        handle.write(data)
    return path


def nested(levels, one_line=False):
    """A ModelDef text ``levels`` blocks deep (graph, op, then attr/value/func repeating)."""
    unit = ["attr {", "value {", "func {"]
    opens = ["graph {", "op {"] + [unit[i % 3] for i in range(levels - 2)]
    sep = " " if one_line else "\n"
    return (sep.join(opens) + sep + sep.join("}" * len(opens)) + "\n").encode()


# --------------------------------------------------------------------------- nesting

@pytest.mark.parametrize("one_line", [False, True])
def test_300_nested_blocks_are_a_format_error_naming_file_line_and_limit(tmp_path, one_line):
    path = write(tmp_path, nested(300, one_line))
    for call in (ge_graph.parse_model, ge_graph.to_msaccucmp_json):
        with pytest.raises(GraphFormatError) as info:
            call(path)
        message = str(info.value)
        assert path in message and str(ge_text.MAX_NESTING) in message and "nest" in message
        line = 1 if one_line else ge_text.MAX_NESTING + 1
        assert "line {} ".format(line) in info.value.rule
        assert info.value.offset is not None


def test_nesting_up_to_the_limit_parses(tmp_path):
    model = ge_graph.parse_model(write(tmp_path, nested(ge_text.MAX_NESTING)))
    assert len(model.graph[0].op) == 1
    with pytest.raises(GraphFormatError):
        ge_graph.parse_model(write(tmp_path, nested(ge_text.MAX_NESTING + 1)))


def test_braces_inside_strings_and_comments_do_not_count_as_nesting():
    text = 'graph {\n  name: "' + "{" * 500 + '" # ' + "{<" * 500 + "\n  op {\n    name: '{{{{'\n  }\n}\n"
    model = ge_graph.parse_model_text(text)
    assert model.graph[0].name == "{" * 500 and model.graph[0].op[0].name == "{{{{"


# --------------------------------------------------------------------------- long lines

def test_a_line_of_blank_runs_parses_as_without_them():
    data = golden_bytes()
    padded = data.replace(b'  op {\n    name: "IteratorV2"', b"  op {" + b" \t" * 200000 + b'name: "IteratorV2"'
                          + b" " * 70000, 1)
    assert len(padded) > len(data) + 400000
    assert ge_graph.parse_model_text(padded) == ge_graph.parse_model_text(data)
    assert ge_graph.to_msaccucmp_json(ge_graph.parse_model_text(padded)) == ge_graph.to_msaccucmp_json(GOLDEN)


@pytest.mark.parametrize("body", [
    bytes(range(256)) * 40,  # every byte, escaped by the writer (octal, \\n, \\", \\\\)
    b"\\" * 5001 + b'"' * 3001,
    b"\x41\x01" * 3000 + b"A",  # octal escapes next to digits at the cut points
    "\u65e5\u672c".encode("utf-8") * 2000,
])
def test_long_strings_are_cut_between_escapes_and_read_back_whole(body):
    op = ge_graph.make_op("op", "T", 1, inputs=[], output_descs=[], attrs={"blob": body.decode("latin-1")})
    model = ge_graph.make_model([("g", [op])])
    model.graph[0].op[0].name = body.decode("utf-8", "replace")
    text = ge_graph.format_model(model)
    assert max(len(line) for line in text.split("\n")) > 4096
    assert ge_graph.parse_model_text(text) == model
    hand = 'graph {\n  name: "' + "1" * 1023 + "\\x4" + "1" * 5000 + "\\x41\\101" * 700 + '"\n}\n'
    assert ge_graph.parse_model_text(hand).graph[0].name == "1" * 1023 + "A" + "1" * 4999 + "AA" * 700


def test_errors_on_a_laid_out_line_point_at_the_input():
    data = b"graph {" + b" " * 100000 + b' name: "x"' + b" " * 5000 + b" bogus_field: 1 }\n"
    with pytest.raises(GraphFormatError) as info:
        ge_graph.parse_model_text(data, allow_unknown=False)
    start = data.index(b"bogus_field")
    assert start - 1 <= info.value.offset <= start + len(b"bogus_field")
    assert "bogus_field" in info.value.rule and len(info.value.rule) < 400  # the 100 KB line is clipped
    data = b'graph { name: "' + "\u00e9".encode("utf-8") * 3000 + b'"' + b" " * 9000 + b"}}\n"
    with pytest.raises(GraphFormatError) as info:
        ge_graph.parse_model_text(data)
    assert data.rindex(b"}") - 1 <= info.value.offset <= data.rindex(b"}")


def test_a_number_longer_than_4096_characters_is_refused():
    data = b"graph {\n  op {\n    id: " + b"7" * 100000 + b"\n  }\n}\n"
    with pytest.raises(GraphFormatError) as info:
        ge_graph.parse_model_text(data)
    assert "4096" in info.value.rule and info.value.offset == data.index(b"7")


# --------------------------------------------------------------------------- fuzzing

def attempt(reader, call, *args, **kwargs):
    """Run ``call``, tallied in OUTCOMES (helpers.fuzz_outcomes)."""
    return fuzz_outcomes.attempt(OUTCOMES, reader, call, *args, **kwargs)


@pytest.fixture(scope="module", autouse=True)
def fuzz_totals():
    yield
    fuzz_outcomes.report(OUTCOMES, "GE graph fuzz totals")


PIECES = [b"{", b"}", b"<", b">", b"[", b"]", b":", b",", b";", b"#", b"\n", b"\r\n", b" ", b"\t", b'"', b"'",
          b"\\", b"\\x4", b"\\377", b"\\400", b"\\u00e9", b"\\?", b"op {", b"  }\n", b"attr {", b"value {",
          b"list {", b"func {", b"name: ", b"id: ", b"i: ", b"b: ", b"s: ", b'key: "_no_task"',
          b'key: "_datadump_origin_name"', b"0x", b"-0", b"99999999999999999999999", b"true", b"\xff",
          b"\xe6\x97\xa5", b"\x00", b" " * 5000, b"x" * 5000, b"{" * 120, b"}" * 120]


@st.composite
def graph_texts(draw):
    """The golden graph with a few edits: pieces inserted, spans deleted or replaced."""
    data = bytearray(golden_bytes())
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(st.sampled_from(PIECES))
        if action == "insert":
            data[at:at] = piece
        elif action == "delete":
            del data[at:at + draw(st.integers(1, 40))]
        else:
            data[at:at + len(piece)] = piece
    return bytes(data)


@settings(max_examples=250, **FUZZ)
@given(data=graph_texts())
def test_fuzz_graph_readers(tmp_path, data):
    path = write(tmp_path, data)
    attempt("iter_graphs", lambda: list(ge_graph.iter_graphs(path)))
    model = attempt("parse_model", ge_graph.parse_model, path)
    if model is not None:
        attempt("to_msaccucmp_json", ge_graph.to_msaccucmp_json, model)


FAST_PIECES = PIECES + [b"\n    id: 0\n", b"\n    id: 7\n", b"\n      i: -3\n", b"\n      f: 1.5\n", b"\n      f: 1e40\n",
                        b"\n      b: t\n", b'\n      s: "\\x41"\n', b"\n    future: 3\n", b"\n    future {\n    }\n",
                        b"\n        dtype: DT_FLOAT\n", b"\n        dtype: 3\n", b"\n  }\n  op {\n",
                        b"\n      list {\n        i: 1\n        i: 2\n      }\n", b'\n    input: "a"\n', b"\n    id: 0x1F\n"]


def text_format_model(data, allow_unknown):
    """The model text_format parses from ``data`` (None: its GraphFormatError), bypassing the fast parse."""
    model = ge_graph.ge_schema.ModelDef()
    try:
        ge_text._parse_lines(data.decode("utf-8"), model, allow_unknown, "mem")
    except GraphFormatError:
        return None
    return model


@settings(max_examples=300, **FUZZ)
@given(edits=st.lists(st.tuples(st.integers(0, 3200), st.sampled_from(["insert", "delete", "replace"]),
                                st.sampled_from(FAST_PIECES), st.integers(1, 30)), max_size=4),
       allow_unknown=st.booleans())
def test_fast_parse_is_text_format_or_declines(edits, allow_unknown):
    """What the fast parse encodes is what text_format parses; where text_format fails it declines."""
    data = bytearray(golden_bytes())
    for at, action, piece, length in edits:
        if action == "insert":
            data[at:at] = piece
        elif action == "delete":
            del data[at:at + length]
        else:
            data[at:at + len(piece)] = piece
    data = bytes(data)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return  # parse_model_text refuses it before either parser
    wire = ge_text._fast_wire(data, allow_unknown)
    OUTCOMES["fast parse"]["declined" if wire is None else "encoded"] += 1
    if wire is not None:
        fast = ge_graph.ge_schema.ModelDef()
        fast.ParseFromString(wire)
        assert text_format_model(data, allow_unknown) == fast


def test_fast_parse_takes_the_canonical_layout():
    assert ge_text._fast_wire(golden_bytes(), True) is not None
    big = graph_of_ops(200000)
    assert ge_text._fast_wire(big, False) is not None
    assert ge_graph.parse_model_text(big) == text_format_model(big, True)


SPECIALS = {
    "nested_300": nested(300),
    "nested_300_one_line": nested(300, True),
    "nested_1000_in_list": b"graph { op { attr { value { list { na [" + b"{ attr { value { func {" * 250 + b"]}}}}}\n",
    "unknown_nested_300": b"graph { future " + b"{ deeper " * 300 + b"}" * 301 + b"\n",
    "unterminated_string": b'graph { name: "abc\n}\n',
    "string_of_backslashes": b'graph { name: "' + b"\\" * 20001 + b'" }\n',
    "crlf_only": b"\r\n" * 50000,
    "comment_lines": b"#a\n" * 50000,
    "one_huge_line": b"graph { " + b'name: "x" ' * 50000 + b"}\n",
    "bad_utf8": b'graph { name: "\xff\xfe" }\n',
    "nul_bytes": b"\x00" * 10000,
    "empty": b"",
}


@pytest.mark.parametrize("name", sorted(SPECIALS))
def test_special_graph_texts(tmp_path, name):
    path = write(tmp_path, SPECIALS[name])
    attempt("iter_graphs", lambda: list(ge_graph.iter_graphs(path)))
    model = attempt("parse_model", ge_graph.parse_model, path)
    attempt("to_msaccucmp_json", ge_graph.to_msaccucmp_json, path)
    if model is not None:
        assert ge_graph.to_msaccucmp_json(model) == ge_graph.to_msaccucmp_json(path)


# --------------------------------------------------------------------------- peak memory

_READERS = r"""
from npu_dump_hook.formats import ge_graph

def run(reader, arg):
    if reader == "parse_model":
        ge_graph.parse_model(arg)
    elif reader == "to_msaccucmp_json":
        ge_graph.to_msaccucmp_json(arg)
    elif reader == "iter_graphs":
        for graph in ge_graph.iter_graphs(arg):
            pass
"""

#: Documented bounds (ge_text / ge_graph docs): the scanner holds the file's bytes and one
#: OpSummary per op; the full parse holds the text, its str and the ModelDef, whose messages cost
#: protobuf's C++ backend (TF 1.15 images) ~550 bytes each even when empty (``op {}`` is 10).
SCAN_BOUND = (16, 0, 64 * MIB)
PARSE_BOUND = (32, 640, 64 * MIB)  # x file size, bytes per block ("{"), fixed


def bound(reader, path):
    factor, per_block, extra = SCAN_BOUND if reader == "iter_graphs" else PARSE_BOUND
    with open(path, "rb") as handle:
        data = handle.read()
    return factor * len(data) + per_block * data.count(b"{") + extra


def measure(cases):
    """[(peak RSS growth in bytes, seconds, outcome)] for (reader, path) cases, each in a fork of one fresh child."""
    return forked_rss.measure(_READERS, cases)


def graph_of_ops(size):
    """The golden graph's ops repeated (fresh ids) to about ``size`` bytes: canonical text."""
    data = golden_bytes()
    head = data[:data.index(b"  op {")]
    body = data[data.index(b"  op {"):data.rindex(b"}")]
    copies = max(1, size // len(body))
    return head + b"".join(re.sub(rb"id: \d+", b"id: %d" % i, body) for i in range(copies)) + b"}\n"


def _worst_cases(folder):
    """(reader, path, note) for the worst inputs of the three readers."""
    golden = golden_bytes()
    files = {
        "spaces": (b" " * (10 * MB), "10 MB of spaces (the reproduction)"),
        "spaces_in_op": (golden.replace(b"  op {\n", b"  op {" + b" \t" * (5 * MB) + b"\n", 1),
                         "golden graph with 10 MB of blanks on one line"),
        "escapes": (b'graph {\n  name: "' + b"\\n" * (5 * MB) + b'"\n}\n', "a 10 MB string of escapes"),
        "escaped_quotes": (b'graph {\n  name: "' + b'\\"' * MB + b'"\n}\n', "a 2 MB string of \\\""),
        "comment_lines": (b"#a\n" * MB, "1,000,000 comment lines (3 MB)"),
        "newlines": (b"\n" * (2 * MB), "2 MB of newlines"),
        "nested": (nested(300), "300 nested blocks"),
        "many_ops": (b"graph {\n" + b"  op {\n  }\n" * (MB // 10) + b"}\n", "100,000 empty ops (1 MB)"),
        "concatenated": (b"graph {\n  name: " + b'"a" ' * (MB // 4) + b"\n}\n", "250,000 adjacent strings"),
        "graph": (graph_of_ops(2 * MB), "canonical graph, 2 MB"),
        "graph_scan": (graph_of_ops(10 * MB), "canonical graph, 10 MB"),
    }
    paths = {name: write(folder, data, name + ".txt") for name, (data, _) in files.items()}
    cases = []
    for name in ("spaces", "spaces_in_op", "escapes", "escaped_quotes", "comment_lines", "newlines", "nested",
                 "many_ops", "concatenated", "graph"):
        cases.append(("parse_model", paths[name], files[name][1]))
    for name in ("spaces", "nested", "graph"):
        cases.append(("to_msaccucmp_json", paths[name], files[name][1]))
    for name in ("spaces_in_op", "escapes", "escaped_quotes", "comment_lines", "nested", "many_ops", "graph_scan"):
        cases.append(("iter_graphs", paths[name], files[name][1]))
    return cases


def test_peak_memory_of_the_graph_readers_stays_within_its_bound(tmp_path):
    cases = _worst_cases(tmp_path)
    results = measure([(reader, path) for reader, path, _note in cases])
    lines = []
    for (reader, path, note), (peak, seconds, outcome) in zip(cases, results):
        lines.append("{:<18} {:<48} size {:>6.1f} MB  peak +{:>6.1f} MB  bound {:>6.1f} MB  {:5.2f} s  {}".format(
            reader, note, os.path.getsize(path) / 1e6, peak / 1e6, bound(reader, path) / 1e6,
            seconds, outcome[:60]))
    report = "\n".join(lines)
    if os.environ.get("NPU_FUZZ_REPORT"):
        with open(os.environ["NPU_FUZZ_REPORT"], "a") as handle:
            handle.write(report + "\n")
    print("\n" + report)
    for (reader, path, note), (peak, seconds, outcome) in zip(cases, results):
        assert not outcome.startswith("ESCAPE"), (reader, note, outcome)
        assert peak <= bound(reader, path), "{} {}\n{}".format(reader, note, report)
    assert all(outcome.startswith("GraphFormatError") and "nest" in outcome
               for (reader, _, note), (_, _, outcome) in zip(cases, results) if note == "300 nested blocks")


# --------------------------------------------------------------------------- linear time

def _scan(path):
    for _ in ge_graph.iter_graphs(path):
        pass


LINEAR = {  # what: (reader, text of size ~n, n)
    "parse_model (blank line)": (ge_graph.parse_model, lambda n: b"graph {" + b" " * n + b"}\n", MB),
    "parse_model (string of escapes)": (ge_graph.parse_model,
                                        lambda n: b'graph { name: "' + b"\\t" * (n // 2) + b'" }\n', MB // 2),
    "parse_model (canonical graph)": (ge_graph.parse_model, graph_of_ops, 120000),
    "iter_graphs (escaped quotes)": (_scan, lambda n: b'graph { name: "' + b'\\"' * (n // 2) + b'" }\n', 800000),
    "iter_graphs (comment lines)": (_scan, lambda n: b"graph {\n" + b"# c\n" * (n // 4) + b"}\n", 800000),
    "iter_graphs (non-canonical ops)": (_scan, lambda n: graph_of_ops(n).replace(b"\n  }\n", b"\n  } # op\n"),
                                        300000),
}


@pytest.mark.parametrize("what", sorted(LINEAR))
def test_time_is_linear_in_the_input(tmp_path, what):
    call, make, n = LINEAR[what]
    small, large = write(tmp_path, make(n), "small.txt"), write(tmp_path, make(4 * n), "large.txt")
    call(small)  # warm up (imports, caches)
    # CPU, not wall: the suite runs beside other jobs on 2 cores
    ratio = (timing.best_time(call, large, 5, time.process_time)
             / timing.best_time(call, small, 5, time.process_time))
    assert ratio < 10, "{}: 4x the input took {:.1f}x the time".format(what, ratio)
