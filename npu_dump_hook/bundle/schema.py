"""bundle.json sections whose shape the bundle format fixes and both sides need (TF-free).

The hook side builds these sections (:mod:`npu_dump_hook.run_record`,
:mod:`npu_dump_hook.fingerprints`); the bundle side writes and verifies them. Their shape is
part of the format (docs/bundle-format.md §2, §2.2), so it is defined here, with the bundle,
and the hook side imports it::

    run_section(steps=2, captured_step=0)   the ``run`` section: every RUN_SECTION_KEYS key first
    fingerprint_problems(doc["fingerprints"])  what is wrong with a ``fingerprints`` value's shape

Nothing here reads a file or imports anything outside the standard library.
"""
from typing import Any, Dict, List, Sequence

__all__ = ["RUN_SECTION_KEYS", "RUN_MODES", "run_mode_problems", "run_section", "FINGERPRINT_ALGORITHM",
           "fingerprint_problems"]

#: Keys every bundle.json ``run`` section has (the bundle format contract); None when unknown.
RUN_SECTION_KEYS = ("steps", "global_step", "started", "ended", "rank", "device_id")
#: What ``run.mode`` may say: the captured iteration is a training step or an online-inference run
#: (a bundle without ``run.mode`` is a training bundle).
RUN_MODES = ("train", "infer")
#: The digest of every ``fingerprints`` entry (its key in an entry, and ``fingerprints.algorithm``).
FINGERPRINT_ALGORITHM = "sha256"
_HEX = "0123456789abcdef"


def run_section(**values: Any) -> Dict[str, Any]:
    """A ``run`` section: every key of :data:`RUN_SECTION_KEYS` (None unless given), then the rest."""
    section = {key: None for key in RUN_SECTION_KEYS}  # type: Dict[str, Any]
    section.update(values)
    return section


def run_mode_problems(run: Any) -> List[str]:
    """``run.mode`` present and not one of :data:`RUN_MODES` (its type is checked with the section's)."""
    mode = run.get("mode") if isinstance(run, dict) else None
    if isinstance(mode, str) and mode not in RUN_MODES:
        return ["run.mode {!r} is not one of {}".format(mode, ", ".join(RUN_MODES))]
    return []


def fingerprint_problems(section: Any) -> List[str]:
    """Problems of a ``fingerprints`` value's shape (bundle.json rule; empty when valid or null)."""
    if section is None:
        return []
    if not isinstance(section, dict):
        return ["fingerprints is neither null nor an object"]
    problems = []
    if section.get("algorithm") != FINGERPRINT_ALGORITHM:
        problems.append("fingerprints.algorithm is not {!r}".format(FINGERPRINT_ALGORITHM))
    step = section.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
        problems.append("fingerprints.step is neither null nor an integer")
    for part, extra in (("state", ()), ("batch", ("source", "op_type"))):
        problems.extend(_part_problems(part, section.get(part), extra))
    if not isinstance(section.get("skipped", []), list):
        problems.append("fingerprints.skipped is not a list")
    return problems


def _part_problems(part: str, entries: Any, extra: Sequence[str]) -> List[str]:
    """Problems of ``fingerprints.state`` or ``fingerprints.batch`` (null is allowed)."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        return ["fingerprints.{} is neither null nor a list".format(part)]
    return ["fingerprints.{}[{}]: {}".format(part, number, problem)
            for number, entry in enumerate(entries) for problem in _entry_problems(entry, extra)]


def _entry_problems(entry: Any, extra: Sequence[str]) -> List[str]:
    if not isinstance(entry, dict):
        return ["not an object"]
    problems = []
    for key in ("name", "dtype") + tuple(extra):
        if not isinstance(entry.get(key), str):
            problems.append("{} missing or not a string".format(key))
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                              for d in shape):
        problems.append("shape missing or not a list of non-negative integers")
    digest = entry.get(FINGERPRINT_ALGORITHM)
    if not (isinstance(digest, str) and len(digest) == 64 and all(c in _HEX for c in digest)):
        problems.append("sha256 missing or not 64 lowercase hex digits")
    return problems
