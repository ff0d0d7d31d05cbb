"""The conventions every ``npu-dump-hook`` command follows (npu_dump_hook/cli/__init__.py docstring):
-q/-v/--debug anywhere, --help with examples, the exit-code table, one-line errors naming what
the user typed, quiet exit on a closed stdout, warnings printed once. parse's own rules are
in test_parse.py."""
import argparse
import ast
import errno
import io
import json
import os
import re
import subprocess
import sys
import tarfile

import pytest

from npu_dump_hook import constants
from npu_dump_hook.cli import _HANDLERS, build_parser, main
from npu_dump_hook.cli import _bundle as cli_bundle
from npu_dump_hook.cli._exit import EXIT_CHECK_FAILED, EXIT_ERROR, EXIT_OK, EXIT_USAGE
from npu_dump_hook.errors import LocateError

from helpers.bundles import GRAPH_NAME, RELU, TIME_DIR, make_run, write

CLI_DIR = os.path.dirname(os.path.abspath(cli_bundle.__file__))
CHAIN = os.path.join("data", "dump", TIME_DIR, "0", GRAPH_NAME, "1", "0")
NOT_A_BUNDLE = "not a bundle (neither a bundle folder nor a .tar/.tar.gz archive)"
NO_TIME_BOUND = "no time bound (--since)"

# the smallest argv each command parses, for the option-placement tests
MINIMAL = {
    "collect": ["collect", "--dump-path", "d", "--graph-dir", "g", "--out", "o"],
    "verify": ["verify", "b"],
    "inspect": ["inspect", "b"],
    "parse": ["parse", "p"],
    "demo": ["demo"],
    "run": ["run", "--", "train.py"],
    "compare": ["compare", "b"],
}


def run_cli(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def source(tmp_path):
    """(dump path, graph dir) of a small run made without the hook."""
    located = make_run(tmp_path / "src")
    return located.dump_path, os.path.dirname(located.graph_file)


@pytest.fixture
def good(tmp_path):
    write(tmp_path / "b", make_run(tmp_path / "src"))
    return tmp_path / "b"


def collect_argv(source, out, *extra):
    return ["collect", "--dump-path", source[0], "--graph-dir", source[1], "--out", str(out)] + list(extra)


# -- 1. -q / -v / --debug on every command, before or after its name --------------------------


def test_minimal_argv_covers_every_command():
    assert sorted(MINIMAL) == sorted(_HANDLERS)


@pytest.mark.parametrize("command", sorted(MINIMAL))
@pytest.mark.parametrize("flag, dest", [("-q", "quiet"), ("--quiet", "quiet"), ("-v", "verbose"),
                                        ("--verbose", "verbose"), ("--debug", "debug")])
def test_common_options_before_and_after_the_command(command, flag, dest):
    parser = build_parser()
    argv = MINIMAL[command]
    plain = parser.parse_args(argv)
    assert (plain.quiet, plain.verbose, plain.debug) == (False, False, False)
    before = parser.parse_args([flag] + argv)
    after = parser.parse_args(_after_the_arguments(argv, flag))
    assert getattr(before, dest) is True and getattr(after, dest) is True
    others = {"quiet", "verbose", "debug"} - {dest}
    assert not any(getattr(before, o) or getattr(after, o) for o in others)


def _after_the_arguments(argv, flag):
    """``flag`` after the command's arguments: before a ``--`` (run: what follows is the script's)."""
    if "--" in argv:
        cut = argv.index("--")
        return argv[:cut] + [flag] + argv[cut:]
    return argv + [flag]


def _boom(*_args, **_kwargs):
    raise RuntimeError("boom")


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_shows_the_traceback_before_or_after_the_command(good, capsys, monkeypatch, where):
    monkeypatch.setattr(cli_bundle.bundle, "verify_bundle", _boom)
    code, _out, err = run_cli(capsys, ["verify", str(good)])
    assert code == EXIT_ERROR
    assert err == "npu-dump-hook: internal error: RuntimeError: boom (--debug shows the traceback)\n"
    argv = ["--debug", "verify", str(good)] if where == "before" else ["verify", str(good), "--debug"]
    code, _out, err = run_cli(capsys, argv)
    assert code == EXIT_ERROR
    assert err.startswith("Traceback (most recent call last):") and "RuntimeError: boom" in err
    assert err.splitlines()[-1].startswith("npu-dump-hook: internal error: RuntimeError: boom")


def test_default_shows_warnings_quiet_hides_them_verbose_adds_info(tmp_path, source, capsys):
    code, _out, err = run_cli(capsys, collect_argv(source, tmp_path / "o1"))
    assert code == 0
    assert [line for line in err.splitlines() if NO_TIME_BOUND in line]  # a warning...
    assert ": info: " not in err  # ...but no INFO logs by default
    code, out, err = run_cli(capsys, ["-q"] + collect_argv(source, tmp_path / "o2"))
    assert code == 0 and out.startswith("bundle ") and err == ""
    code, _out, err = run_cli(capsys, collect_argv(source, tmp_path / "o3", "-v"))
    assert code == 0
    assert "npu-dump-hook: info: training graph" in err
    code, _out, err = run_cli(capsys, collect_argv(source, tmp_path / "o4", "--debug"))
    assert code == 0
    assert "npu-dump-hook: info: npu_dump_hook.locate: training graph" in err  # --debug names the logger


def _logs_each_level(*_args, **_kwargs):
    import logging

    log = logging.getLogger("npu_dump_hook.somewhere")
    for level in ("debug", "info", "warning", "error"):
        getattr(log, level)("%s record", level)
    return []


@pytest.mark.parametrize("flags, shown", [
    ([], ["warning", "error"]),
    (["-q"], ["error"]),
    (["--quiet"], ["error"]),
    (["-v"], ["info", "warning", "error"]),
    (["--debug"], ["debug", "info", "warning", "error"]),
])
@pytest.mark.parametrize("where", ["before", "after"])
def test_log_levels(good, capsys, monkeypatch, flags, shown, where):
    monkeypatch.setattr(cli_bundle.bundle, "verify_bundle", _logs_each_level)
    argv = flags + ["verify", str(good)] if where == "before" else ["verify", str(good)] + flags
    code, out, err = run_cli(capsys, argv)
    assert code == 0 and out == "{}: ok\n".format(good)
    levels = [re.match(r"npu-dump-hook: (\w+): ", line).group(1) for line in err.splitlines()]
    assert levels == shown, err


def test_quiet_contradicts_verbose_and_debug(capsys):
    for argv in (["-q", "verify", "b", "-v"], ["verify", "b", "--quiet", "--debug"]):
        code, _out, err = run_cli(capsys, argv)
        assert code == EXIT_USAGE
        assert len(err.splitlines()) == 1 and "-q/--quiet contradicts" in err


def test_logging_state_is_restored_after_main(good, capsys):
    import logging

    logger = logging.getLogger("npu_dump_hook")
    before = (logger.level, logger.propagate, list(logger.handlers))
    main(["verify", str(good), "-v"])
    assert (logger.level, logger.propagate, list(logger.handlers)) == before


# -- 2. every subcommand's --help: a description and examples ---------------------------------


@pytest.mark.parametrize("command", sorted(_HANDLERS))
def test_help_has_description_and_examples(command, capsys):
    code, out, _err = run_cli(capsys, [command, "--help"])
    assert code == 0
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    assert sub.description and len(sub.description) > 40
    assert isinstance(sub.formatter_class, type) and issubclass(sub.formatter_class,
                                                                argparse.RawDescriptionHelpFormatter)
    assert "\nexamples:\n" in out
    examples = out.split("\nexamples:\n", 1)[1].splitlines()
    assert examples and all(line.startswith("  npu-dump-hook {}".format(command)) for line in examples if line)
    for option in ("-q, --quiet", "-v, --verbose", "--debug"):
        assert option in out


# -- 3. exit codes: only the table, 2 for paths that do not exist ------------------------------


def test_exit_code_table():
    assert (EXIT_OK, EXIT_CHECK_FAILED, EXIT_USAGE, EXIT_ERROR) == (0, 1, 2, 3)


def _int_literal(node):
    if sys.version_info >= (3, 8):
        return isinstance(node, ast.Constant) and type(node.value) is int
    return isinstance(node, ast.Num) and type(node.n) is int


def test_cli_modules_return_no_literal_exit_codes():
    """Exit codes come from _exit.py: no ``return 0`` or ``sys.exit(1)`` in the CLI modules."""
    offenders = []
    for name in sorted(os.listdir(CLI_DIR)):
        if not name.endswith(".py") or name == "_exit.py":
            continue
        with open(os.path.join(CLI_DIR, name)) as fh:
            tree = ast.parse(fh.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Return) and _int_literal(node.value):
                offenders.append("{}:{}: return of a literal".format(name, node.lineno))
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "exit" and node.args and \
                    _int_literal(node.args[0]):
                offenders.append("{}:{}: exit with a literal".format(name, node.lineno))
    assert offenders == []


@pytest.mark.parametrize("argv", [["verify"], ["inspect"]])  # parse: tests/cli/test_parse.py
def test_missing_path_names_it_and_exits_2(tmp_path, capsys, argv):
    missing = str(tmp_path / "nosuch")
    code, out, err = run_cli(capsys, argv + [missing])
    assert code == EXIT_USAGE
    assert out == ""
    assert err == "npu-dump-hook: {}: no such file or folder\n".format(missing)


def test_collect_folders_that_do_not_exist_or_are_files_exit_2(tmp_path, source, capsys):
    missing = str(tmp_path / "nosuch")
    code, _out, err = run_cli(capsys, ["collect", "--dump-path", missing, "--graph-dir", source[1], "--out", "o"])
    assert (code, err) == (EXIT_USAGE, "npu-dump-hook: --dump-path {}: no such folder\n".format(missing))
    a_file = tmp_path / "file"
    a_file.write_text("x")
    code, _out, err = run_cli(capsys, ["collect", "--dump-path", source[0], "--graph-dir", str(a_file), "--out", "o"])
    assert (code, err) == (EXIT_USAGE, "npu-dump-hook: --graph-dir {}: not a folder\n".format(a_file))
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv, expected", [
    ([], "npu-dump-hook: a command is required: collect, verify, inspect, parse, demo, run, compare "
         "(see npu-dump-hook --help)"),
    (["verify"], "npu-dump-hook: verify: the following arguments are required: BUNDLE "
                 "(see npu-dump-hook verify --help)"),
    (["verify", "b", "--bogus"], "npu-dump-hook: unrecognized arguments: --bogus (see npu-dump-hook --help)"),
    (["collect", "--dump-path", "d", "--graph-dir", "g", "--out", "o", "--link", "reflink"],
     "npu-dump-hook: collect: argument --link: invalid choice: 'reflink' (choose from 'auto', 'hardlink', 'copy') "
     "(see npu-dump-hook collect --help)"),
    (["frobnicate"], None),
])
def test_usage_errors_are_one_line_exit_2(capsys, argv, expected):
    code, out, err = run_cli(capsys, argv)
    assert code == EXIT_USAGE
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith("npu-dump-hook: ")
    if expected is not None:
        assert err.rstrip("\n") == expected


# -- 4. one-line errors, no traceback unless --debug -------------------------------------------


@pytest.mark.parametrize("command", ["inspect", "verify"])
def test_junk_file_is_not_a_bundle_one_line_exit_1(tmp_path, monkeypatch, capsys, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "junk.bin").write_bytes(os.urandom(3000))
    code, out, err = run_cli(capsys, [command, "junk.bin"])
    assert code == EXIT_CHECK_FAILED
    assert out == ""
    assert err == "npu-dump-hook: junk.bin: {}\n".format(NOT_A_BUNDLE)


def test_folder_without_bundle_json_is_not_a_bundle(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    code, out, err = run_cli(capsys, ["inspect", str(tmp_path / "d")])
    assert (code, out) == (EXIT_CHECK_FAILED, "")
    assert err == "npu-dump-hook: {}: not a bundle (no data/bundle.json)\n".format(tmp_path / "d")


@pytest.mark.parametrize("command", ["inspect", "verify"])
def test_truncated_archive_is_one_line_exit_1(tmp_path, source, capsys, command):
    assert main(collect_argv(source, tmp_path / "b.tar.gz", "-q")) == 0
    data = (tmp_path / "b.tar.gz").read_bytes()
    (tmp_path / "cut.tar.gz").write_bytes(data[: len(data) // 2])
    capsys.readouterr()
    code, _out, err = run_cli(capsys, [command, str(tmp_path / "cut.tar.gz")])
    assert code == EXIT_CHECK_FAILED
    assert len(err.splitlines()) == 1 and err.startswith("npu-dump-hook: {}: ".format(tmp_path / "cut.tar.gz"))
    assert "Traceback" not in err


def test_hostile_archive_in_inspect_is_one_line_exit_1(tmp_path, capsys):
    evil = tmp_path / "evil.tar"
    with tarfile.open(str(evil), "w") as tar:
        tar.addfile(tarfile.TarInfo("../escape"), io.BytesIO(b""))
    code, _out, err = run_cli(capsys, ["inspect", str(evil)])
    assert code == EXIT_CHECK_FAILED
    assert len(err.splitlines()) == 1 and str(evil) in err and "Traceback" not in err


# -- 5. stdout closed early (| head): no BrokenPipeError ---------------------------------------


def _read_one_line_then_close(argv):
    proc = subprocess.Popen([sys.executable, "-m", "npu_dump_hook"] + argv, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode("utf-8", "replace")
    proc.stderr.close()
    return proc.wait(timeout=120), first, err


def test_parse_into_a_closed_pipe_exits_quietly(tmp_path):
    mapping = tmp_path / "mapping.csv"
    # far more than a pipe buffer (64 KiB) of text output
    mapping.write_text("".join("{},Add.op_{}.1.2.{}\n".format(10 ** 19 + i, i, 1700000000000000 + i)
                               for i in range(20000)))
    code, first, err = _read_one_line_then_close(["parse", str(mapping)])
    assert first.decode().startswith(str(mapping))
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert (code, err) == (EXIT_OK, "")


def test_inspect_into_a_closed_pipe_exits_with_the_verdict(tmp_path):
    located = make_run(tmp_path / "src")
    located.warnings = ["warning number {} about something long enough to fill the pipe".format(i)
                        for i in range(5000)]
    write(tmp_path / "b", located)
    code, first, err = _read_one_line_then_close(["inspect", str(tmp_path / "b")])
    assert first.decode().startswith("bundle ")
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert (code, err) == (EXIT_OK, "")
    os.unlink(str(tmp_path / "b" / CHAIN / RELU))  # a damaged bundle keeps exit 1 even so
    code, first, err = _read_one_line_then_close(["inspect", str(tmp_path / "b")])
    assert (code, err) == (EXIT_CHECK_FAILED, "")


# -- 6. inspect text: values, not reprs; exit 1 on problems in both modes ----------------------

DEMO_LIKE = {
    "schema": "npu_dump_hook/bundle@1",
    "backend": "emulated",
    "created": "2026-12-01T08:37:57+00:00",
    "run": {"steps": 1, "global_step": {"after": 1, "before": 0}, "rank": None, "device_id": 0,
            "reference": {"skipped": 14, "skip_reasons": {"resource handle: no array value": 14}}},
    "randomness": {
        "policy": "strip", "seed": 20221,
        "sources": [
            {"action": "stripped (mask keeps all, scale dropout/Const -> 1)", "category": "dropout",
             "op": "dropout/random_uniform/RandomUniform", "type": "RandomUniform"},
            {"action": "removed (1 consumer(s) now read TensorSliceDataset)", "category": "shuffle",
             "op": "ShuffleDataset", "type": "ShuffleDataset"},
            {"action": "pinned (seed=[20221, 427477393] replaces the build-time constant)",
             "category": "stateless_seed", "op": "k1/StatelessRandomGetKeyCounter", "type": "StatelessRandomGetKeyCounter"},
            {"action": "pinned (seed=[20221, 1] replaces the build-time constant)",
             "category": "stateless_seed", "op": "k2/StatelessRandomGetKeyCounter", "type": "StatelessRandomGetKeyCounter"},
            {"action": "not handled: inside graph function f", "category": "op", "op": "f/RandomUniform",
             "type": "RandomUniform"},
        ],
        "not_handled": [{"action": "not handled: inside graph function f", "category": "op",
                         "op": "f/RandomUniform", "type": "RandomUniform"}],
    },
    "graph": {"file": "graph/ge_proto_00000000_Build.txt", "name": "ge_default_1", "stage": "Build", "op_count": 155,
              "choice": {"method": "iterator", "rules": [{"rule": "iterator", "kept": 1}], "candidates": [
                  {"chosen": True, "file": "/x/a_Build.txt", "reason": "chosen: 155 op(s), 2 iterator op(s)"},
                  {"chosen": False, "file": "/x/b_Build.txt", "reason": "no iterator op"}], "warnings": []}},
    "dump": {"time_dir": "20261201083757", "device_id": "0", "model_name": "ge_default_1", "model_id": "1",
             "steps": ["0", "1"]},
    "files": [{"path": "dump/a", "size": 100, "kind": "dump"}, {"path": "golden/a.npy", "size": 2000, "kind": "golden"},
              {"path": "golden/b.npy", "size": 48, "kind": "golden"}],
    "coverage": {"expected": 3, "dumped": 2, "missing": ["Momentum"], "not_in_graph": []},
    "warnings": ["stale time folder 20261130 ignored"],
}


def test_inspect_text_formatter_shows_values_not_reprs():
    lines = cli_bundle.format_bundle(DEMO_LIKE, [])
    text = "\n".join(lines)
    for repr_mark in ("{", "}", "['", "None", "True", "False", "'"):
        assert repr_mark not in text, (repr_mark, text)
    by_label = {}
    for line in lines:
        label = line[:12].strip()
        if label:
            current = label
        by_label.setdefault(current, []).append(line[12:])
    assert by_label["bundle"] == ["npu_dump_hook/bundle@1, backend emulated, created 2026-12-01T08:37:57+00:00"]
    assert by_label["graph"] == ["graph/ge_proto_00000000_Build.txt (name ge_default_1, stage Build, 155 ops)",
                                 "chosen by rule iterator among 2 candidates: 155 op(s), 2 iterator op(s)"]
    assert by_label["dump"] == ["time 20261201083757, device 0, model ge_default_1, id 1, steps 0, 1"]
    assert by_label["run"] == ["1 step(s), global step 0 -> 1, rank -, device 0"]
    assert by_label["randomness"] == [
        "policy strip, 5 source(s), 1 not handled",
        "stripped dropout/random_uniform/RandomUniform (dropout): mask keeps all, scale dropout/Const -> 1",
        "removed ShuffleDataset (shuffle): 1 consumer(s) now read TensorSliceDataset",
        "pinned 2 source(s) (stateless_seed)",
        "not handled: f/RandomUniform (RandomUniform): inside graph function f",
    ]
    assert by_label["files"] == ["3 file(s), 2148 bytes (2.1 KiB): 1 dump, 2 golden"]
    assert by_label["golden"] == ["2 file(s), 2048 bytes (2.0 KiB); 14 tensor(s) not captured "
                                  "(resource handle: no array value: 14)"]
    assert by_label["coverage"] == ["2/3 ops of the graph have dump files; missing 1: Momentum"]
    assert by_label["warnings"] == ["stale time folder 20261130 ignored"]
    assert by_label["verify"] == ["ok"]


def test_inspect_text_of_a_post_hoc_bundle(tmp_path, source, capsys):
    assert main(collect_argv(source, tmp_path / "b", "-q")) == 0
    capsys.readouterr()
    code, out, _err = run_cli(capsys, ["inspect", str(tmp_path / "b")])
    assert code == 0
    assert "randomness  not recorded" in out
    assert "dump        time {}, device 0, model {}, id 1, steps 0".format(TIME_DIR, GRAPH_NAME) in out
    assert "chosen as the only candidate" in out
    assert "{" not in out and "None" not in out and "[" not in out


def test_inspect_exits_1_on_problems_in_text_and_json(good, capsys):
    os.unlink(str(good / CHAIN / RELU))
    code, out, _err = run_cli(capsys, ["inspect", str(good)])
    assert code == EXIT_CHECK_FAILED
    assert re.search(r"^verify +[1-9][0-9]* problem\(s\)$", out, re.M), out
    code, out, _err = run_cli(capsys, ["inspect", str(good), "--json"])
    assert code == EXIT_CHECK_FAILED
    assert json.loads(out)["verification"]["ok"] is False


# -- 8. collect --out X.tar[.gz] implies --archive ---------------------------------------------


@pytest.mark.parametrize("out, archive", [("b.tar.gz", "tar.gz"), ("b.tgz", "tar.gz"), ("b.tar", "tar"),
                                          ("B.TAR", "tar"), ("b", None)])
def test_archive_suffix_implies_archive(out, archive):
    assert cli_bundle.archive_for(out, None) == archive
    if archive is not None:
        assert cli_bundle.archive_for(out, archive) == archive


@pytest.mark.parametrize("name, fmt", [("b.tar.gz", "r:gz"), ("b.tar", "r:")])
def test_collect_to_an_archive_name_writes_only_that_archive(tmp_path, source, capsys, name, fmt):
    out = tmp_path / name
    code, stdout, _err = run_cli(capsys, collect_argv(source, out, "-q"))
    assert code == 0
    assert out.is_file() and sorted(os.listdir(str(tmp_path))) == sorted(["src", name])
    with tarfile.open(str(out), fmt) as tar:
        assert "b/data/bundle.json" in tar.getnames()
    assert stdout.startswith("bundle {}: ".format(out))
    assert main(["verify", str(out), "-q"]) == 0


def test_collect_out_suffix_contradicting_archive_is_a_usage_error(tmp_path, source, capsys):
    code, out, err = run_cli(capsys, collect_argv(source, tmp_path / "x.tar", "--archive", "tar.gz"))
    assert (code, out) == (EXIT_USAGE, "")
    assert err == ("npu-dump-hook: --out {} names a tar archive but --archive is tar.gz (drop --archive, or end "
                   "--out in .tar.gz)\n".format(tmp_path / "x.tar"))
    assert os.listdir(str(tmp_path)) == ["src"]


def test_collect_folder_plus_archive_still_works(tmp_path, source, capsys):
    code, out, _err = run_cli(capsys, collect_argv(source, tmp_path / "b", "--archive", "tar", "-q"))
    assert code == 0
    assert (tmp_path / "b").is_dir() and (tmp_path / "b.tar").is_file()
    assert "archive {}".format(tmp_path / "b.tar") in out


# -- 9. warnings once ---------------------------------------------------------------------------


def test_collect_warning_printed_once(tmp_path, source, capsys):
    code, _out, err = run_cli(capsys, collect_argv(source, tmp_path / "b"))
    assert code == 0
    lines = [line for line in err.splitlines() if NO_TIME_BOUND in line]
    assert len(lines) == 1, err
    assert lines[0].startswith("npu-dump-hook: warning: no time bound (--since): took the newest time folder")


def test_cli_only_warnings_are_printed_too(tmp_path, source, capsys, monkeypatch):
    from npu_dump_hook import collect as library

    real = library.collect_post_hoc

    def with_extra_warning(*args, **kwargs):
        result = real(*args, **kwargs)
        result.warnings.append("data/dump/x: a warning only the result carries")
        return result

    monkeypatch.setattr(cli_bundle, "collect_post_hoc", with_extra_warning)
    code, _out, err = run_cli(capsys, collect_argv(source, tmp_path / "b"))
    assert code == 0
    assert err.count("a warning only the result carries") == 1
    assert err.count(NO_TIME_BOUND) == 1


# -- 10. errors name what the user typed --------------------------------------------------------


def _raising(exc):
    def fail(*_args, **_kwargs):
        raise exc
    return fail


def test_staging_path_in_an_os_error_is_named_as_out(tmp_path, source, capsys, monkeypatch):
    out = str(tmp_path / "bundle")
    staging = os.path.join(str(tmp_path), ".bundle.staging-4242-0123456789ab", "data", "dump", "f")
    monkeypatch.setattr(cli_bundle, "collect_post_hoc",
                        _raising(OSError(errno.ENOSPC, "No space left on device", staging)))
    code, _out, err = run_cli(capsys, collect_argv(source, out))
    assert code == EXIT_ERROR
    assert err == "npu-dump-hook: --out {}: cannot write the bundle: No space left on device\n".format(out)


def test_read_error_under_dump_path_names_dump_path(tmp_path, source, capsys, monkeypatch):
    name = os.path.join(source[0], "x")
    monkeypatch.setattr(cli_bundle, "collect_post_hoc", _raising(PermissionError(errno.EACCES, "Permission denied", name)))
    code, _out, err = run_cli(capsys, collect_argv(source, tmp_path / "b"))
    assert (code, err) == (EXIT_ERROR, "npu-dump-hook: --dump-path {}: cannot read {}: Permission denied\n".format(
        source[0], name))


def test_library_wording_is_rephrased_with_options(tmp_path, source, capsys, monkeypatch):
    message = "no Build graph file (ge_proto_*_Build.txt) in: no existing folder (set DUMP_GRAPH_PATH or pass graph_dirs=)"
    monkeypatch.setattr(cli_bundle, "collect_post_hoc", _raising(LocateError(message)))
    code, _out, err = run_cli(capsys, collect_argv(source, tmp_path / "b"))
    assert code == EXIT_ERROR
    assert "graph_dirs=" not in err and len(err.splitlines()) == 1
    assert err.startswith("npu-dump-hook: --graph-dir {}: no Build graph file".format(source[1]))
    assert "check --graph-dir" in err


def test_staging_path_in_a_library_error_is_named_as_out(tmp_path, source, capsys, monkeypatch):
    from npu_dump_hook.errors import BundleError

    out = str(tmp_path / "bundle")
    staging = os.path.join(str(tmp_path), ".bundle.staging-4242-0123456789ab")
    monkeypatch.setattr(cli_bundle, "collect_post_hoc", _raising(BundleError(
        "two sources map to bundle path {}/data/dump/x".format(staging))))
    code, _out, err = run_cli(capsys, collect_argv(source, out))
    assert (code, err) == (EXIT_ERROR, "npu-dump-hook: two sources map to bundle path {}/data/dump/x\n".format(out))


def test_since_error_names_since(tmp_path, source, capsys):
    code, _out, err = run_cli(capsys, collect_argv(source, tmp_path / "b", "--since", "yesterday"))
    assert code == EXIT_USAGE
    assert len(err.splitlines()) == 1 and err.startswith("npu-dump-hook: option --since='yesterday': ")


def test_nothing_found_names_the_option(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    (tmp_path / "g").mkdir()
    code, _out, err = run_cli(capsys, ["collect", "--dump-path", str(tmp_path / "d"), "--graph-dir",
                                       str(tmp_path / "g"), "--out", str(tmp_path / "o")])
    assert code == EXIT_ERROR
    assert len(err.splitlines()) == 1
    assert re.match(r"npu-dump-hook: --graph-dir \S+: no Build graph file", err)


# -- 11. choices come from the library's constants ----------------------------------------------


def test_choices_are_the_library_constants():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    options = {(command, opt): action for command, parser in sub.items() for action in parser._actions
               for opt in action.option_strings}
    assert tuple(options[("collect", "--link")].choices) == constants.LINK_MODES
    assert tuple(options[("collect", "--checksum")].choices) == constants.CHECKSUMS
    assert tuple(options[("collect", "--archive")].choices) == constants.ARCHIVES
    assert tuple(options[("demo", "--backend")].choices) == constants.BACKEND_CHOICES
    assert tuple(options[("run", "--backend")].choices) == constants.BACKEND_CHOICES
    assert tuple(options[("run", "--stop")].choices) == constants.STOP_MODES
    assert tuple(options[("run", "--link")].choices) == constants.LINK_MODES
    assert tuple(options[("run", "--archive")].choices) == constants.ARCHIVES


# -- the command stays light: no TensorFlow or numpy for --help ---------------------------------


def test_help_loads_neither_tensorflow_nor_numpy():
    code = ("import sys\n"
            "from npu_dump_hook.cli import main\n"
            "assert main(['parse', '--help']) == 0\n"
            "assert main(['collect', '--help']) == 0\n"
            "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'tensorflow'))))\n")
    done = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == ""


def test_log_formatter_prints_a_notice_without_a_level_name():
    import logging

    from npu_dump_hook._cli_conventions import NOTICE, LogFormatter

    def record(**extra):
        return logging.makeLogRecord(dict({"name": "npu_dump_hook.hook", "levelno": logging.INFO,
                                           "levelname": "INFO", "msg": "npu_dump_hook: bundle %s", "args": ("b",)},
                                          **extra))

    formatter = LogFormatter(drop_script_prefix=True)
    assert formatter.format(record(**{NOTICE: True})) == "npu-dump-hook: bundle b"
    assert formatter.format(record()) == "npu-dump-hook: info: bundle b"
