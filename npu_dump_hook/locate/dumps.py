"""Find this run's dump step folders.

Dump folders (:func:`find_step_dirs`)
    ``{dump_path}/{time}/{device_id}/{sanitized graph name}/{model_id}/{step}``; ``{time}``
    is GE's ``YYYYMMDDhhmmss`` local start time of the dump (all digits), ``{model_id}`` and
    ``{step}`` are decimal. With ``since``, a time folder must be named at or after the
    second of ``since`` (GE names it when its dump starts, after the hook's begin). A folder
    named earlier is stale unless its model folder was written at or after ``since`` (GE
    initialised before the hook began in a long-lived process); that is taken with a
    warning. Without ``since``, the newest time folder per device wins, with a warning.
    Per device, when several time folders qualify the newest wins (warning); different
    devices (multi-card start skew) are all kept. Steps sort numerically.

    Symlinks are never followed below ``dump_path`` (``dump_path`` itself is taken as
    given): a symlinked time, device, model, model_id or step folder is skipped with a
    warning naming the link (and named in the error when nothing else is found), so a link
    such as ``{step} -> /etc`` cannot pull files from outside the dump tree into a bundle.
"""
import datetime
import json
import os
import re
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple, Union

from ..constants import COMPLETE_STEP_MARKER, INCOMPLETE_STEP_MARKER
from ..errors import LocateError
from ..formats.names import parse_time_dir, sanitize
from ._walk import PathLike, link_note, not_older, subdirs, warn

__all__ = ["StepDir", "find_step_dirs"]

_DIGITS = re.compile(r"[0-9]+\Z")


@dataclass
class StepDir:
    """One ``{time}/{device_id}/{model_name}/{model_id}/{step}`` dump folder."""

    time_dir: str
    device_id: str
    model_name: str
    model_id: str
    step: str
    path: str


def find_step_dirs(
    dump_path: PathLike,
    model_name: str,
    since: Optional[float] = None,
    device_id: Optional[Union[int, str]] = None,
    warnings: Optional[List[str]] = None,
) -> List[StepDir]:
    """Step folders of graph ``model_name`` under ``dump_path`` (rules: module docstring).

    ``model_name`` is the graph name; it is sanitized like GE does. Warnings are appended
    to ``warnings`` when given (and logged). Raises :class:`LocateError` saying what was
    searched where when nothing matches.
    """
    root = os.path.abspath(os.fspath(dump_path))
    folder = sanitize(model_name)
    notes = [] if warnings is None else warnings
    links = []  # type: List[str]
    time_dirs, rejected = _time_dirs(root, since, links)
    per_device = {}  # type: Dict[str, List[Tuple[str, str, bool]]]
    for time_dir, fresh in time_dirs:
        dev_links = []  # type: List[str]
        for dev in _digit_dirs(os.path.join(root, time_dir), dev_links):
            if device_id is not None and int(dev) != int(device_id):
                continue
            model_dir = os.path.join(root, time_dir, dev, folder)
            if os.path.islink(model_dir):
                links.append(model_dir)
                continue
            if not os.path.isdir(model_dir):
                continue
            if not fresh and not _written_since(model_dir, since):
                rejected.append("{} (named before the time bound, not written since)".format(time_dir))
                continue
            per_device.setdefault(dev, []).append((time_dir, model_dir, fresh))
        links.extend(p for p in dev_links
                     if device_id is None or int(os.path.basename(p)) == int(device_id))
    steps = []  # type: List[StepDir]
    for dev in sorted(per_device, key=int):
        runs = sorted(per_device[dev], key=lambda r: _time_key(r[0]))
        time_dir, model_dir, fresh = runs[-1]
        _note_choice(notes, dev, runs, since, fresh)
        steps.extend(_steps_of(time_dir, dev, folder, model_dir, links))
    for link in links:
        warn(notes, link_note(link, "dump chain {time}/{device_id}/{model_name}/{model_id}/{step}"))
    if not steps:
        raise LocateError(_nothing_found(root, folder, model_name, since, device_id,
                                         [t for t, _ in time_dirs], rejected, links), [root], what="dump")
    _refuse_incomplete(root, steps)
    return steps


def _refuse_incomplete(root: str, steps: List[StepDir]) -> None:
    """A step folder whose writing failed part-way or never finished carries INCOMPLETE_STEP_MARKER
    (so does the dump folder of an NPU run that never ended): bundling it would pass a silently
    smaller dump for the whole step. A folder with a COMPLETE_STEP_MARKER must hold exactly the
    files it lists: another file there was written by another process."""
    for path in [root] + [step.path for step in steps]:
        reason = _marker_text(os.path.join(path, INCOMPLETE_STEP_MARKER))
        if reason is not None:
            where = "folder" if path == root else "step folder"
            raise LocateError("dump {} {} was left incomplete by a failed dump, or an interrupted or killed one "
                              "({}; marker {}): not bundled".format(where, path, reason or "no reason recorded",
                                                                    INCOMPLETE_STEP_MARKER), [path], what="dump")
    for step in steps:
        _refuse_mixed(step.path)


def _marker_text(marker: str) -> Optional[str]:
    """The marker's first 500 characters (escaped on output), None when there is no marker. A
    marker that is no regular file (a link, a FIFO) still marks the folder, unread."""
    if not os.path.lexists(marker):
        return None
    if os.path.islink(marker) or not os.path.isfile(marker):
        return "marker is not a regular file"
    with open(marker, errors="replace") as handle:
        return handle.read(500).strip()


def _refuse_mixed(folder: str) -> None:
    """LocateError when a completed step folder holds files its completion mark does not list
    (another process wrote into it) or lacks files it lists."""
    mark = os.path.join(folder, COMPLETE_STEP_MARKER)
    if not os.path.isfile(mark) or os.path.islink(mark):
        return
    try:
        with open(mark, errors="replace") as handle:
            doc = json.loads(handle.read(1 << 24))
        listed = set(doc["files"])
        writer = doc.get("writer") or {}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise LocateError("dump step folder {}: unreadable completion mark {}: {}".format(
            folder, COMPLETE_STEP_MARKER, exc), [folder], what="dump")
    present = {entry.name for entry in _entries(folder)} - {COMPLETE_STEP_MARKER}
    extra, missing = sorted(present - listed), sorted(listed - present)
    if extra or missing:
        raise LocateError("dump step folder {} mixes the files of two processes: the run that completed it "
                          "(pid {}, time folder {}) {}: not bundled".format(
                              folder, writer.get("pid", "?"), writer.get("time_dir", "?"),
                              "; ".join(part for part in (
                                  _names("did not write", extra), _names("wrote but which are gone", missing))
                                  if part)), [folder], what="dump")


def _entries(folder: str) -> List[Any]:
    with os.scandir(folder) as it:
        return list(it)


def _names(what: str, names: List[str]) -> str:
    if not names:
        return ""
    more = " (+{} more)".format(len(names) - 5) if len(names) > 5 else ""
    return "{} file(s) it {}: {}{}".format(len(names), what, ", ".join(names[:5]), more)


def _time_dirs(root: str, since: Optional[float],
               links: List[str]) -> Tuple[List[Tuple[str, bool]], List[str]]:
    """All-digit folders under ``root`` as (name, fresh) and the rejected ones; all-digit
    symlinks to folders go to ``links``."""
    bound = None if since is None else datetime.datetime.fromtimestamp(int(since))
    kept, rejected = [], []  # type: List[Tuple[str, bool]], List[str]
    found = []  # type: List[str]
    for entry in subdirs(root, found):
        if not _DIGITS.match(entry.name):
            continue
        if bound is None:
            kept.append((entry.name, True))
            continue
        named = parse_time_dir(entry.name)
        if named is None:
            rejected.append("{} (not a YYYYMMDDhhmmss time)".format(entry.name))
        else:
            kept.append((entry.name, named >= bound))
    links.extend(p for p in found if _DIGITS.match(os.path.basename(p)))
    return kept, rejected


def _time_key(name: str) -> Tuple[int, str]:
    return (len(name), name)  # all digits: longer is later, then lexicographic


def _note_choice(notes: List[str], dev: str, runs: List[Tuple[str, str, bool]],
                 since: Optional[float], fresh: bool) -> None:
    time_dir = runs[-1][0]
    older = [r[0] for r in runs[:-1]]
    if since is None:
        warn(notes, "no time bound (--since): took the newest time folder {} for device {}{}".format(
            time_dir, dev, "; older ones ignored: " + ", ".join(older) if older else ""))
    elif older:
        warn(notes, "device {}: several time folders since the time bound; took the newest, {}; "
                     "ignored: {}".format(dev, time_dir, ", ".join(older)))
    if since is not None and not fresh:
        warn(notes, "time folder {} is named before the time bound but its model folder was written "
                     "after it (GE started before the hook); taken".format(time_dir))


def _steps_of(time_dir: str, dev: str, folder: str, model_dir: str, links: List[str]) -> List[StepDir]:
    steps = []
    for model_id in _digit_dirs(model_dir, links):
        for step in _digit_dirs(os.path.join(model_dir, model_id), links):
            path = os.path.join(model_dir, model_id, step)
            steps.append(StepDir(time_dir, dev, folder, model_id, step, path))
    steps.sort(key=lambda s: (int(s.model_id), int(s.step)))
    return steps


def _digit_dirs(folder: str, links: Optional[List[str]] = None) -> List[str]:
    """All-digit real folders in ``folder``; all-digit symlinks to folders go to ``links``."""
    found = []  # type: List[str]
    names = [e.name for e in subdirs(folder, found) if _DIGITS.match(e.name)]
    if links is not None:
        links.extend(p for p in found if _DIGITS.match(os.path.basename(p)))
    return sorted(names, key=int)


def _written_since(model_dir: str, since: Optional[float]) -> bool:
    """True when the model folder or a folder below it (2 levels) was modified since."""
    stack = [(model_dir, 0)]
    while stack:
        path, depth = stack.pop()
        try:
            if not_older(os.stat(path).st_mtime, since):
                return True
        except OSError:
            continue
        if depth < 2:
            stack.extend((os.path.join(path, d), depth + 1) for d in _digit_dirs(path))
    return False


def _nothing_found(root: str, folder: str, model_name: str, since: Optional[float],
                   device_id: Any, time_dirs: List[str], rejected: List[str], links: List[str]) -> str:
    bound = "no time bound" if since is None else "time folders named at or after {} (local)".format(
        datetime.datetime.fromtimestamp(int(since)).strftime("%Y%m%d%H%M%S"))
    device = "any device" if device_id is None else "device {}".format(device_id)
    present = sorted(
        "{}/{}/{}".format(t, dev, entry.name)
        for t in time_dirs for dev in _digit_dirs(os.path.join(root, t))
        for entry in subdirs(os.path.join(root, t, dev))
    )
    parts = [
        "no dump folder {}/{{time}}/{{device_id}}/{}/{{model_id}}/{{step}} for graph {!r}".format(
            root, folder, model_name),
        "searched: {}; {}".format(bound, device),
        "time folders: {}".format(", ".join(sorted(time_dirs)) or "none"),
    ]
    if rejected:
        parts.append("rejected: {}".format(", ".join(sorted(rejected))))
    if links:
        parts.append("symlinked folders not followed: {}".format(", ".join(sorted(links))))
    if present:
        more = " (+{} more)".format(len(present) - 20) if len(present) > 20 else ""
        parts.append("model folders present: {}{}".format(", ".join(present[:20]), more))
    if not os.path.isdir(root):
        parts.append("dump path does not exist")
    return "; ".join(parts)
