"""``collect``, ``verify`` and ``inspect``: argument handling and printing over the library.

Exit codes (the table is :mod:`._exit`):

* ``verify BUNDLE`` / ``inspect BUNDLE``: 2 when BUNDLE does not exist (one line naming it);
  1 when it exists but is not a bundle (a file that is no tar archive, a folder or archive
  without ``data/bundle.json``, an archive that cannot be read or holds hostile members)
  and when verification finds problems, in text and ``--json`` alike; else 0. Something
  that exists but is not a bundle is a failed check, not a usage error: the question
  "is this a good bundle?" has an answer, and it is the answer ``verify`` gives for a
  damaged bundle.
* ``collect``: 2 for a ``--dump-path``/``--graph-dir`` that does not exist or is not a folder,
  a bad ``--since``, an ``--out`` suffix that contradicts ``--archive``; 3 when the run is not
  found, the destination exists (without ``--force``) or writing fails. Errors name the
  option as typed (``--out``, ``--graph-dir``, ...), never the library's staging folders.

``--out`` ending in ``.tar``/``.tar.gz``/``.tgz`` implies ``--archive tar``/``tar.gz`` (only
the archive is written); an explicit ``--archive`` must agree with that suffix.

``inspect`` opens the bundle once with :func:`npu_dump_hook.bundle.open_bundle` (an archive is
extracted once, every member checked first; a bundle.json above its size cap, too deeply
nested, with lone surrogates or known keys of the wrong type is the package's one-line error,
exit 1) and verifies that opened bag; its text is written here from the bundle.json dict
(:func:`format_bundle`); it shows values, never Python reprs. ``--json`` streams the document
(memory: the parsed bundle.json, at most 64 MiB of it, not a second copy as text).
``verify`` is :func:`npu_dump_hook.bundle.verify_bundle` (the same archive extraction).
"""
import argparse
import collections
import collections.abc
import json
import os
import re
import sys
import tarfile
import zlib
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .. import bundle
from ..collect import collect_post_hoc
from ..bundle.selection import chosen_counts, selection_text
from ..errors import (BundleError, BundleExistsError, LocateError, NpuDumpError, OptionError,
                      UnsafePathError)
from . import warn
from ._exit import EXIT_CHECK_FAILED, EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError, pending
from ._output import say
from ._since import parse_since

__all__ = ["run", "format_bundle", "archive_for"]


def run(args: argparse.Namespace) -> int:
    """Dispatch on ``args.command`` (one of collect, verify, inspect)."""
    handler = {"collect": _collect, "verify": _verify, "inspect": _inspect}.get(args.command)
    if handler is None:
        raise CliError("unknown bundle command {}".format(args.command), EXIT_USAGE)
    return handler(args)


# --------------------------------------------------------------------------- collect

_STAGING = re.compile(r"[^\s'\"]*?\.[^/\s'\"]+\.(?:staging|old)-\d+-[0-9a-f]+(?:\.tar(?:\.gz)?)?")
# Library wording that names Python parameters; the CLI user typed options.
_REWORDING = (
    ("set DUMP_GRAPH_PATH or pass graph_dirs=", "check --graph-dir"),
    ("graph_keyword=", "--graph-keyword"),
    ("device_id=", "--device-id"),
    ("(pass force=True to replace it)", "(add --force to replace it)"),
)


def archive_for(out: str, archive: Optional[str]) -> Optional[str]:
    """The archive format for ``--out``/``--archive``: an archive suffix on ``--out`` implies
    it; an ``--archive`` that contradicts the suffix is a usage error."""
    named = bundle.archive_format(out)
    if archive is None or named is None or named == archive:
        return archive or named
    raise CliError("--out {} names a {} archive but --archive is {} (drop --archive, or end --out in .{})"
                   .format(out, named, archive, archive), EXIT_USAGE)


def _require_dir(option: str, path: str) -> None:
    if not os.path.exists(path):
        raise CliError("{} {}: no such folder".format(option, path), EXIT_USAGE)
    if not os.path.isdir(path):
        raise CliError("{} {}: not a folder".format(option, path), EXIT_USAGE)


def _collect(args: argparse.Namespace) -> int:
    _require_dir("--dump-path", args.dump_path)
    _require_dir("--graph-dir", args.graph_dir)
    archive = archive_for(args.out, args.archive)
    since = parse_since(args.since) if args.since is not None else None
    try:
        result = collect_post_hoc(args.dump_path, args.graph_dir, args.out, since=since, device_id=args.device_id,
                                  graph_keyword=args.graph_keyword, link=args.link, checksum=args.checksum,
                                  archive=archive, force=args.force)
    except BundleExistsError as exc:
        raise _exists_error(exc, args) from exc
    except LocateError as exc:
        raise _locate_error(exc, args) from exc
    except OSError as exc:
        raise _os_error(exc, args) from exc
    except OptionError:
        raise
    except NpuDumpError as exc:  # BundleError, FormatError, ...: reworded, staging folders named as --out
        raise CliError(_user_words(_one_line(exc), args), EXIT_ERROR) from exc
    cov = result.coverage or {}
    say("bundle {}: {} files, {} bytes ({} linked, {} copied), steps {}, coverage {}".format(
        result.location, result.files, result.bytes, result.linked, result.copied,
        ", ".join(result.steps) or "-", _coverage_fraction(cov)))
    if result.archive and result.path:
        say("archive {}".format(result.archive))
    for warning in result.warnings:
        warn(warning)
    return EXIT_OK


def _coverage_fraction(cov: Mapping[str, Any]) -> str:
    """``dumped/expected``; for a dump_layer dump the chosen ops' and how many were left out."""
    counts = chosen_counts(cov)
    if counts is None:
        return "{}/{}".format(_text(cov.get("dumped")), _text(cov.get("expected")))
    return "{}/{} chosen (dump_layer), {} not selected".format(*counts)


def _user_words(message: str, args: argparse.Namespace) -> str:
    """``message`` with library wording replaced by the options the user typed."""
    for library, user in _REWORDING:
        message = message.replace(library, user)
    return _STAGING.sub(lambda m: args.out, message)


def _exists_error(exc: BundleExistsError, args: argparse.Namespace) -> CliError:
    where = exc.path or args.out
    if os.path.abspath(where) == os.path.abspath(args.out):
        return CliError("--out {}: exists and is not empty (add --force to replace it)".format(args.out))
    return CliError("--out {}: {} exists and is not empty (add --force to replace it)".format(args.out, where))


def _locate_error(exc: LocateError, args: argparse.Namespace) -> CliError:
    message = _user_words(str(exc), args)
    if exc.what == "graph_keyword" and args.graph_keyword is not None:
        prefix = "--graph-keyword {}".format(args.graph_keyword)
    elif exc.what == "graph":
        prefix = "--graph-dir {}".format(args.graph_dir)
    elif exc.what == "dump":
        prefix = "--dump-path {}".format(args.dump_path)
    else:
        return CliError(message)
    return CliError("{}: {}".format(prefix, message))


def _within(path: str, root: str) -> bool:
    path, root = os.path.abspath(path), os.path.abspath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _os_error(exc: OSError, args: argparse.Namespace) -> CliError:
    reason = exc.strerror or str(exc)
    name = exc.filename if isinstance(exc.filename, str) else None
    if name is None:
        return CliError(_user_words(reason, args))
    out_parent = os.path.dirname(os.path.abspath(args.out))
    if _STAGING.search(name) or _within(name, args.out) or os.path.abspath(name) == out_parent:
        return CliError("--out {}: cannot write the bundle: {}".format(args.out, reason))
    for option, root in (("--dump-path", args.dump_path), ("--graph-dir", args.graph_dir)):
        if _within(name, root):
            return CliError("{} {}: cannot read {}: {}".format(option, root, name, reason))
    return CliError("{}: {}".format(name, reason))


# --------------------------------------------------------------------------- verify / inspect


class _Problem(collections.namedtuple("_Problem", "kind path detail")):
    """A problem the CLI reports itself (same text as the library's Problem)."""

    def __str__(self) -> str:
        return "{}: {}: {}".format(self.kind, self.path or "<bundle>", self.detail)


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _require_bundle_path(path: str) -> None:
    """Usage error when ``path`` does not exist; failed check when it cannot be a bundle."""
    if not os.path.lexists(path):
        raise CliError("{}: no such file or folder".format(path), EXIT_USAGE)
    if os.path.isdir(path):
        return
    if not os.path.isfile(path) or not _is_tar(path):
        raise CliError("{}: not a bundle (neither a bundle folder nor a .tar/.tar.gz archive)".format(path),
                       EXIT_CHECK_FAILED)


def _is_tar(path: str) -> bool:
    try:
        return tarfile.is_tarfile(path)
    except (OSError, EOFError, zlib.error):
        return False


def _problems(path: str) -> List[Any]:
    try:
        return list(bundle.verify_bundle(path))
    except UnsafePathError as exc:  # a hostile archive is a failed check, not a crash
        return [_Problem("unsafe", "", _one_line(exc))]
    except BundleError as exc:
        raise CliError(_one_line(exc), EXIT_CHECK_FAILED) from exc


def _verify(args: argparse.Namespace) -> int:
    _require_bundle_path(args.bundle)
    problems = _problems(args.bundle)
    code = EXIT_CHECK_FAILED if problems else EXIT_OK
    pending(args, code)
    for problem in problems:
        say(str(problem))
    if problems:
        say("npu-dump-hook: {}: {} problem(s)".format(args.bundle, len(problems)), file=sys.stderr)
    else:
        say("{}: ok".format(args.bundle))
    return code


def _open(path: str) -> "bundle.BundleView":
    """The bundle at ``path`` opened (:func:`bundle.open_bundle`); a failed check when it is none."""
    if os.path.isdir(path) and not os.path.isfile(os.path.join(path, bundle.DATA_DIR, bundle.BUNDLE_JSON)):
        raise CliError("{}: not a bundle (no {}/{})".format(path, bundle.DATA_DIR, bundle.BUNDLE_JSON),
                       EXIT_CHECK_FAILED)
    try:
        return bundle.open_bundle(path)
    except BundleError as exc:  # no bundle.json in the archive, not JSON, hostile members
        raise CliError(_one_line(exc), EXIT_CHECK_FAILED) from exc
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise CliError("{}: not a readable archive: {}".format(path, _one_line(exc)), EXIT_CHECK_FAILED) from exc


def _inspect(args: argparse.Namespace) -> int:
    _require_bundle_path(args.bundle)
    with _open(args.bundle) as view:  # an archive is extracted once, for reading and verifying
        doc = view.doc
        problems = _problems(view.root)
    code = EXIT_CHECK_FAILED if problems else EXIT_OK
    pending(args, code)
    if args.json:
        out = dict(doc)
        out["verification"] = {"ok": not problems, "problems": [
            {"kind": p.kind, "path": p.path, "detail": p.detail} for p in problems]}
        json.dump(out, sys.stdout, indent=1)  # streamed: no second copy of the document as one string
        sys.stdout.write("\n")
    else:
        for line in format_bundle(doc, problems):
            say(line)
    return code


# --------------------------------------------------------------------------- inspect text

_WIDTH = 12  # label column


def _text(value: Any) -> str:
    """A JSON value as plain text: "-" for null, lists joined with ", ", objects as "key value"."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value) or "-"
    if isinstance(value, collections.abc.Mapping):
        return ", ".join("{} {}".format(k, _text(v)) for k, v in value.items()) or "-"
    return str(value)


def _size(n: int) -> str:
    if n < 1024:
        return "{} bytes".format(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024.0  # type: ignore[assignment]
        if n < 1024 or unit == "TiB":
            return "{:.1f} {}".format(n, unit)
    return ""  # pragma: no cover


def _bytes(n: int) -> str:
    return "{} bytes".format(n) if n < 1024 else "{} bytes ({})".format(n, _size(n))


def _row(label: str, text: str) -> str:
    return "{:<{w}}{}".format(label, text, w=_WIDTH) if label else " " * _WIDTH + text


def _section(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, collections.abc.Mapping) else {}


def _global_step(value: Any) -> str:
    if isinstance(value, collections.abc.Mapping):
        before, after = value.get("before"), value.get("after")
        if before is not None or after is not None:
            return "{} -> {}".format(_text(before), _text(after))
    return _text(value)


def _graph_lines(graph: Mapping[str, Any]) -> List[str]:
    lines = [_row("graph", "{} (name {}, stage {}, {} ops)".format(
        _text(graph.get("file")), _text(graph.get("name")), _text(graph.get("stage")), _text(graph.get("op_count"))))]
    choice = _section(graph.get("choice"))
    if choice:
        candidates = [c for c in choice.get("candidates") or [] if isinstance(c, collections.abc.Mapping)]
        chosen = next((c for c in candidates if c.get("chosen")), None)
        method = str(choice.get("method") or "-")
        if method == "only_candidate":
            why = "chosen as the only candidate"
        else:
            why = "chosen by rule {}".format(method)
            if candidates:
                why += " among {} candidates".format(len(candidates))
        reason = chosen.get("reason") if chosen else None
        if reason:
            why += ": " + re.sub(r"^chosen:\s*", "", str(reason))
        lines.append(_row("", why))
        for warning in choice.get("warnings") or []:
            lines.append(_row("", "note: {}".format(_text(warning))))
    elif graph.get("reason"):
        lines.append(_row("", "chosen: {}".format(_text(graph.get("reason")))))
    return lines


def _dump_lines(dump: Mapping[str, Any]) -> List[str]:
    def chain(item: Mapping[str, Any]) -> str:
        return "time {}, device {}, model {}, id {}".format(
            _text(item.get("time_dir")), _text(item.get("device_id")), _text(item.get("model_name")),
            _text(item.get("model_id")))

    lines = [_row("dump", "{}, steps {}".format(chain(dump), _text(dump.get("steps"))))]
    chains = [c for c in dump.get("chains") or [] if isinstance(c, collections.abc.Mapping)]
    mixed = any(dump.get(k) is None for k in ("time_dir", "device_id", "model_name", "model_id"))
    if mixed and len(chains) > 1:
        for item in chains:
            lines.append(_row("", "step {}: {}".format(_text(item.get("step")), chain(item))))
    return lines


def _randomness_lines(randomness: Any) -> List[str]:
    if not isinstance(randomness, collections.abc.Mapping):
        return [_row("randomness", "not recorded")]
    sources = [s for s in randomness.get("sources") or [] if isinstance(s, collections.abc.Mapping)]
    not_handled = [s for s in randomness.get("not_handled") or [] if isinstance(s, collections.abc.Mapping)]
    lines = [_row("randomness", "policy {}, {} source(s), {} not handled".format(
        _text(randomness.get("policy")), len(sources), len(not_handled)))]
    by_verb = collections.OrderedDict()  # type: Dict[str, List[Mapping[str, Any]]]
    for source in sources:
        action = str(source.get("action") or "")
        if action.startswith("not handled"):
            continue
        verb = re.split(r"[\s(:]", action, 1)[0] or "-"
        by_verb.setdefault(verb, []).append(source)
    for verb, items in by_verb.items():
        if verb in ("removed", "stripped"):
            for source in items:
                lines.append(_row("", "{} {} ({}): {}".format(
                    verb, _text(source.get("op")), _text(source.get("category")),
                    _detail(str(source.get("action")), verb))))
        else:
            categories = sorted({_text(s.get("category")) for s in items})
            lines.append(_row("", "{} {} source(s) ({})".format(verb, len(items), ", ".join(categories))))
    for source in not_handled:
        lines.append(_row("", "not handled: {} ({}): {}".format(
            _text(source.get("op")), _text(source.get("type")),
            re.sub(r"^not handled:?\s*", "", str(source.get("action") or "")) or "-")))
    return lines


def _detail(action: str, verb: str) -> str:
    """"removed (1 consumer(s) now read X)" -> "1 consumer(s) now read X"."""
    rest = action[len(verb):].strip()
    if rest.startswith("(") and rest.endswith(")"):
        rest = rest[1:-1]
    return rest or "-"


def _files_lines(doc: Mapping[str, Any]) -> List[str]:
    files = [f for f in doc.get("files") or [] if isinstance(f, collections.abc.Mapping)]
    kinds = collections.Counter(str(f.get("kind")) for f in files)
    total = sum(int(f.get("size") or 0) for f in files)
    lines = [_row("files", "{} file(s), {}: {}".format(
        len(files), _bytes(total), ", ".join("{} {}".format(n, k) for k, n in sorted(kinds.items())) or "none"))]
    golden = [f for f in files if f.get("kind") == "golden"]
    if golden:
        text = "{} file(s), {}".format(len(golden), _bytes(sum(int(f.get("size") or 0) for f in golden)))
        reference = _section(_section(doc.get("run")).get("reference"))
        if reference.get("skipped"):
            text += "; {} tensor(s) not captured".format(_text(reference.get("skipped")))
            reasons = _section(reference.get("skip_reasons"))
            if reasons:
                text += " ({})".format(", ".join("{}: {}".format(k, _text(v)) for k, v in reasons.items()))
        lines.append(_row("golden", text))
    if doc.get("golden_for") is not None:
        lines.append(_row("golden for", _text(doc.get("golden_for"))))
    return lines


def _coverage_line(cov: Mapping[str, Any]) -> List[str]:
    text = _text(selection_text(cov))
    missing = [str(m) for m in cov.get("missing") or []]
    if missing:
        text += "; missing {}: {}{}".format(len(missing), ", ".join(missing[:10]),
                                            " (+{} more)".format(len(missing) - 10) if len(missing) > 10 else "")
    extra = cov.get("not_in_graph") or []
    if extra:
        text += "; {} dumped op(s) not in the graph".format(len(extra))
    return [_row("coverage", text)] + _control_flow_line(cov)


def _control_flow_line(cov: Mapping[str, Any]) -> List[str]:
    """How many executed ops in loop bodies, cond branches and If/While function bodies have dump
    files, and how many ops of untaken branches did not run (``coverage.control_flow``)."""
    flow, untaken = _section(cov.get("control_flow")), cov.get("not_executed") or []
    if not flow.get("executed") and not untaken:
        return []
    parts = ["{} {}/{}".format(label, _text(_section(flow.get(kind)).get("dumped")),
                               _text(_section(flow.get(kind)).get("executed")))
             for kind, label in (("while", "while-loop bodies"), ("cond", "cond branches"),
                                 ("function", "If/While function bodies"))
             if _section(flow.get(kind)).get("executed")]
    text = "{}/{} executed op(s) have dump files ({})".format(
        _text(flow.get("dumped")), _text(flow.get("executed")), ", ".join(parts) or "none")
    if untaken:
        text += "; not executed (untaken cond branch, or pruned by TensorFlow) {}: {}{}".format(
            len(untaken), ", ".join(str(n) for n in untaken[:10]), " ..." if len(untaken) > 10 else "")
    return [_row("", "control flow: " + text)]


def format_bundle(doc: Mapping[str, Any], problems: Optional[Sequence[Any]] = None) -> List[str]:
    """The lines ``inspect`` prints for a bundle.json ``doc`` (and its verification result,
    unless ``problems`` is None)."""
    run = _section(doc.get("run"))
    device = run.get("device_id")
    lines = [_row("bundle", "{}, backend {}, created {}".format(
        _text(doc.get("schema")), _text(doc.get("backend")), _text(doc.get("created"))))]
    lines += _graph_lines(_section(doc.get("graph")))
    lines += _dump_lines(_section(doc.get("dump")))
    lines.append(_row("run", "{} step(s), global step {}, rank {}, device {}".format(
        _text(run.get("steps")), _global_step(run.get("global_step")), _text(run.get("rank")), _text(device))))
    lines += _randomness_lines(doc.get("randomness"))
    lines += _files_lines(doc)
    lines += _coverage_line(_section(doc.get("coverage")))
    warnings = doc.get("warnings") or []
    if warnings:
        for i, warning in enumerate(warnings):
            lines.append(_row("warnings" if i == 0 else "", _text(warning)))
    else:
        lines.append(_row("warnings", "none"))
    if problems is not None:
        lines.append(_row("verify", "ok" if not problems else "{} problem(s)".format(len(problems))))
        for problem in problems:
            lines.append(_row("", str(problem)))
    return lines
