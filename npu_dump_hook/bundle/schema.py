"""bundle.json sections whose shape the bundle format fixes and both sides need (TF-free).

The hook side builds these sections (:mod:`npu_dump_hook.run_record`,
:mod:`npu_dump_hook.fingerprints`); the bundle side writes and verifies them. Their shape is
part of the format (docs/bundle-format.md §2, §2.2), so it is defined here, with the bundle,
and the hook side imports it::

    run_section(steps=2, captured_step=0)   the ``run`` section: every RUN_SECTION_KEYS key first
    fingerprint_problems(doc["fingerprints"])  what is wrong with a ``fingerprints`` value's shape
    input_problems(doc["inputs"])   what is wrong with an ``inputs`` value (the replay manifest, §2.4)
    environment_problems(doc["run"]["environment"])  the same for the run's ``environment``

Nothing here reads a file or imports anything outside the standard library.
"""
from typing import Any, Dict, List, Sequence

__all__ = ["RUN_SECTION_KEYS", "RUN_MODES", "run_mode_problems", "run_section", "FINGERPRINT_ALGORITHM",
           "fingerprint_problems", "INPUT_SOURCES", "INPUT_FILE_SUFFIX", "input_problems", "ENVIRONMENT_KEYS",
           "ENVIRONMENT_PREFIXES", "environment_problems"]

#: Keys every bundle.json ``run`` section has (the bundle format contract); None when unknown.
RUN_SECTION_KEYS = ("steps", "global_step", "started", "ended", "rank", "device_id")
#: What ``run.mode`` may say: the captured iteration is a training step or an online-inference run
#: (a bundle without ``run.mode`` is a training bundle).
RUN_MODES = ("train", "infer")
#: The digest of every ``fingerprints`` entry (its key in an entry, and ``fingerprints.algorithm``).
FINGERPRINT_ALGORITHM = "sha256"
_HEX = "0123456789abcdef"
#: Where an input value of the captured step came from (``inputs.tensors[].source`` and
#: ``fingerprints.batch[].source``): a feed_dict value, an iterator's, a queue dequeue's, a py_func's.
INPUT_SOURCES = ("feed", "iterator", "queue", "py_func")
#: Every ``inputs.tensors[].file`` is ``inputs/<name>`` ending so (a NumPy ``.npy`` file).
INPUT_FILE_SUFFIX = ".npy"
#: Keys of ``run.environment`` (section 2.5) and the parts that are objects of scalars.
ENVIRONMENT_KEYS = ("versions", "packages", "env", "session")
#: Environment variables a run's ``environment.env`` records (by name prefix).
ENVIRONMENT_PREFIXES = ("ASCEND_", "HCCL_", "TF_", "DUMP_GE_GRAPH", "NPU_DUMP_")
_SESSION_KEYS = ("precision_mode", "fusion_switch_file", "fusion_switch_sha256", "deterministic")


def environment_problems(section: Any) -> List[str]:
    """Problems of a ``run.environment`` value's shape (section 2.5; empty when valid or null)."""
    if section is None:
        return []
    if not isinstance(section, dict):
        return ["run.environment is neither null nor an object"]
    problems = ["run.environment.{} missing".format(key) for key in ENVIRONMENT_KEYS if key not in section]
    for part in ("versions", "env", "session"):
        value = section.get(part, {})
        if not isinstance(value, dict) or not all(
                v is None or isinstance(v, (str, int, float, bool)) for v in value.values()):
            problems.append("run.environment.{} is not an object of strings, numbers, booleans or null".format(part))
    if isinstance(section.get("session"), dict):
        problems.extend("run.environment.session.{} missing".format(key) for key in _SESSION_KEYS
                        if key not in section["session"])
    packages = section.get("packages")
    if packages is not None and not (isinstance(packages, dict) and isinstance(packages.get("count"), int)
                                     and isinstance(packages.get("sha256"), str)):
        problems.append("run.environment.packages is neither null nor {count: int, sha256: str}")
    return problems


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


def input_problems(section: Any) -> List[str]:
    """Problems of an ``inputs`` value's shape (bundle.json rule, docs/bundle-format.md §2.4;
    empty when valid or null): each tensor a fingerprint-like entry with a known ``source`` and a
    ``file`` that is null or ``inputs/*.npy``; ``kept`` true only when every tensor has its file."""
    if section is None:
        return []
    if not isinstance(section, dict):
        return ["inputs is neither null nor an object"]
    problems = []
    for key in ("step", "max_input_bytes", "total_bytes"):
        value = section.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            problems.append("inputs.{} is neither null nor a non-negative integer".format(key))
    if not isinstance(section.get("kept"), bool):
        problems.append("inputs.kept is not true or false")
    if section.get("reason") is not None and not isinstance(section.get("reason"), str):
        problems.append("inputs.reason is neither null nor a string")
    tensors = section.get("tensors")
    if not isinstance(tensors, list):
        return problems + ["inputs.tensors is not a list"]
    for number, entry in enumerate(tensors):
        problems.extend("inputs.tensors[{}]: {}".format(number, p) for p in _input_entry_problems(entry))
        if section.get("kept") is True and isinstance(entry, dict) and entry.get("file") is None:
            problems.append("inputs.tensors[{}]: file is null but inputs.kept is true".format(number))
    return problems


def _input_entry_problems(entry: Any) -> List[str]:
    problems = _entry_problems(entry, ("source", "op_type"))
    if not isinstance(entry, dict):
        return problems
    if isinstance(entry.get("source"), str) and entry["source"] not in INPUT_SOURCES:
        problems.append("source {!r} is not one of {}".format(entry["source"], "|".join(INPUT_SOURCES)))
    path = entry.get("file")
    name = path[len("inputs/"):] if isinstance(path, str) and path.startswith("inputs/") else ""
    if path is not None and not (name.endswith(INPUT_FILE_SUFFIX) and "/" not in name and "\\" not in name
                                 and not name.startswith(".")):
        problems.append("file is neither null nor a path inputs/*{}".format(INPUT_FILE_SUFFIX))
    return problems
