"""Reading a bundle: its ``bundle.json`` (through :func:`~npu_dump_hook.bundle.open_bundle`,
folder or archive), and the human summary."""
from typing import Any, Dict, List, Mapping

from .selection import selection_text
from .view import open_bundle

__all__ = ["read_bundle", "summarize"]


def read_bundle(path: str) -> Dict[str, Any]:
    """The parsed ``data/bundle.json`` of a bundle folder or archive (BundleError if absent
    or not JSON; UnsafePathError for hostile archive members or a symlinked bundle.json)."""
    with open_bundle(path, parts=()) as view:
        return view.doc


def summarize(bundle: Mapping[str, Any]) -> str:
    """Human summary of a bundle.json document (what ``inspect`` prints)."""
    files = [f for f in bundle.get("files", []) if isinstance(f, dict)]
    kinds = {}  # type: Dict[str, int]
    for entry in files:
        kinds[str(entry.get("kind"))] = kinds.get(str(entry.get("kind")), 0) + 1
    graph = bundle.get("graph") or {}
    dump = bundle.get("dump") or {}
    run = bundle.get("run") or {}
    cov = bundle.get("coverage") or {}
    lines = [
        "bundle    {} (backend {}, created {})".format(bundle.get("schema"), bundle.get("backend"), bundle.get("created")),
        "graph     {} (name {}, stage {}, {} ops)".format(graph.get("file"), graph.get("name"), graph.get("stage"),
                                                         graph.get("op_count")),
        "dump      time {} device {} model {} id {} steps {}".format(
            dump.get("time_dir"), dump.get("device_id"), dump.get("model_name"), dump.get("model_id"),
            ", ".join(dump.get("steps") or []) or "-"),
        "run       rank {} device {} steps {} global_step {}".format(
            run.get("rank"), run.get("device_id"), run.get("steps"), run.get("global_step")),
        "files     {} ({} bytes): {}".format(len(files), sum(int(f.get("size") or 0) for f in files),
                                           ", ".join("{} {}".format(n, k) for k, n in sorted(kinds.items())) or "none"),
        _coverage_line(cov),
    ]
    lines.extend(_golden_lines(bundle))
    for warning in bundle.get("warnings") or []:
        lines.append("warning   {}".format(warning))
    return "\n".join(lines)


def _coverage_line(cov: Mapping[str, Any]) -> str:
    if cov.get("not_applicable"):
        return "coverage  not applicable: {}".format(cov["not_applicable"])
    missing = cov.get("missing") or []
    return "coverage  {}{}".format(
        selection_text(cov),
        "; missing: " + ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "") if missing else "")


def _golden_lines(bundle: Mapping[str, Any]) -> List[str]:
    """The fingerprints' size and, in a golden bundle, the NPU bundle it was made for."""
    lines = []
    prints = bundle.get("fingerprints")
    if isinstance(prints, dict):
        lines.append("prints    step {}: state of {} variable(s), batch of {} tensor(s) (sha256)".format(
            prints.get("step"), len(prints.get("state") or []), len(prints.get("batch") or [])))
    target = bundle.get("golden_for")
    if isinstance(target, dict):
        lines.append("golden    for {} (bundle.json sha256 {}, created {}); fingerprints {}".format(
            target.get("path"), str(target.get("bundle_json_sha256"))[:16], target.get("created"),
            "match" if target.get("match") else "DIFFER (on_mismatch={})".format(target.get("on_mismatch"))))
    return lines
