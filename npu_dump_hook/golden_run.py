"""The golden run's view of the NPU bundle it is made for (``NpuDumpHook(initial_state=...)``).

::

    target = NpuBundleTarget.open(path, need_checkpoint=True)   # hook __init__: fails before training
    target.captured_step, target.fingerprints, target.identity()  # what to capture, compare, name
    target.checkpoint_prefix(scratch)                              # data/init/ checkpoint to restore
    target.inputs, target.input_values(scratch)                    # data/inputs/ values to replay
    check_variables(target.checkpoint_variables(...), graph_variables)  # names and shapes must agree

``path`` is a bundle folder or a ``.tar``/``.tar.gz`` archive of one, opened with
:func:`npu_dump_hook.bundle.open_bundle` (its rules: archive members checked before anything is
written, every path inside the bag and through no symlink): ``open`` reads its bundle.json
(of an archive nothing else is extracted), ``checkpoint_prefix`` opens it again for
``data/init/`` (an archive's extraction goes into the golden run's scratch folder, which the
hook removes once restored). The bundle must be an NPU or emulated NPU bundle (``backend``
``"npu"`` or ``"emulated"``). Its ``data/init/`` files follow the reading rules
(docs/bundle-format.md section 4, :meth:`~npu_dump_hook.bundle.BundleView.init_files`): at
``open`` each path stays in the bag, goes through no symlink, names no special file and lists a
sha256 (a null one is not verifiable); ``checkpoint_prefix`` hashes each file against it
before anything is restored. Any BundleError (it names the path and the rule) is an
OptionError(``initial_state``). ``data/inputs/`` (the captured step's input values, manifest
bundle.json ``inputs``) follows the same rules: ``input_values`` checks the manifest's shape
(:func:`~npu_dump_hook.bundle.schema.input_problems`), requires each file to be a listed
``inputs`` entry and hashes it against ``files[]`` before any value is handed out (the golden run
loads them before anything is restored, and checks each value's own sha256 against the manifest:
:mod:`npu_dump_hook.train.replay`).

``identity()`` is what a golden bundle's ``golden_for`` records: the sha256 of the NPU bundle's
``data/bundle.json`` bytes (its own description, which holds every payload digest), its path,
``created`` and ``backend``.
"""
import contextlib
import logging
import os
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _tf
from ._files import open_regular
from .bundle import BundleView, archive_format, looks_like_tar, open_bundle
from .bundle.schema import input_problems
from .errors import BundleError, OptionError

__all__ = ["NpuBundleTarget", "check_variables", "TARGET_BACKENDS"]

logger = logging.getLogger(__name__)

#: Bundles a golden run can be made for: who wrote an NPU dump (a golden bundle, recorded
#: ``"reference"`` or its alias ``"golden"``, is refused by name).
TARGET_BACKENDS = ("npu", "emulated")
_INIT = "init"
_INPUTS = "inputs"
_OPTION = "initial_state"


class NpuBundleTarget(object):
    """The NPU bundle a golden run reproduces: its description, step and checkpoint."""

    def __init__(self, path: str, doc: Dict[str, Any], digest: str, archive: bool) -> None:
        self.path = path
        self.doc = doc
        self.bundle_json_sha256 = digest
        self.archive = archive
        self._view = None  # type: Optional[BundleView]

    @classmethod
    def open(cls, path: Any, need_checkpoint: bool = True) -> "NpuBundleTarget":
        """Read the bundle at ``path``; OptionError(``initial_state``) when it cannot serve."""
        if not isinstance(path, (str, os.PathLike)):
            raise OptionError(_OPTION, path, "must be the path of an NPU bundle (folder or .tar/.tar.gz archive)")
        path = os.path.abspath(os.fspath(path))
        if not (os.path.isdir(path) or (os.path.isfile(path) and (archive_format(path) or looks_like_tar(path)))):
            raise OptionError(_OPTION, path, "is neither a bundle folder nor a bundle archive")
        with _as_option_error(path), open_bundle(path, parts=()) as view:
            target = cls(path, view.doc, view.bundle_json_sha256, view.archive)
            target._check(need_checkpoint, view)
        return target

    def _check(self, need_checkpoint: bool, view: BundleView) -> None:
        backend = self.doc.get("backend")
        if backend not in TARGET_BACKENDS:
            raise OptionError(_OPTION, self.path, "is a {!r} bundle: a golden run is made for an NPU bundle "
                                                  "(backend {})".format(backend, " or ".join(TARGET_BACKENDS)))
        if self.captured_step is None:
            raise OptionError(_OPTION, self.path, "records no captured step (run.captured_step): not a bundle the "
                                                  "hook wrote")
        # The inputs a golden run feeds, as the checkpoint: refused here, before the script trains,
        # not in the middle of its captured step (values and digests are checked when loaded).
        problems = input_problems(self.inputs) if self.inputs is not None else []  # none kept: nothing to feed
        if problems:
            raise OptionError(_OPTION, self.path, "bundle.json inputs: {}".format("; ".join(problems[:5])))
        view.input_files()
        if need_checkpoint and not view.init_files() and not self.stateless:
            raise OptionError(_OPTION, self.path, "has no data/init/ checkpoint (the NPU run was made with "
                                                  "save_initial_state=False, or its save failed); pass "
                                                  "restore_initial_state=False to only compare fingerprints")

    # -- what the NPU run recorded ---------------------------------------------------------
    @property
    def captured_step(self) -> Optional[int]:
        step = (self.doc.get("run") or {}).get("captured_step")
        return step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None

    @property
    def mode(self) -> str:
        """``train`` or ``infer``: which kind of iteration the NPU run captured (``run.mode``)."""
        return "infer" if (self.doc.get("run") or {}).get("mode") == "infer" else "train"

    @property
    def stateless(self) -> bool:
        """An inference run of a graph without variables (a frozen GraphDef): no checkpoint to restore."""
        state = (self.fingerprints or {}).get("state")
        return self.mode == "infer" and state == []

    @property
    def fingerprints(self) -> Optional[Mapping[str, Any]]:
        value = self.doc.get("fingerprints")
        return value if isinstance(value, dict) else None

    @property
    def randomness(self) -> Mapping[str, Any]:
        value = self.doc.get("randomness")
        return value if isinstance(value, dict) else {}

    @property
    def inputs(self) -> Optional[Mapping[str, Any]]:
        """bundle.json ``inputs``: the captured step's kept input values (None: the NPU run kept none)."""
        value = self.doc.get("inputs")
        return value if isinstance(value, dict) else None

    def input_values(self, scratch_dir: str) -> List[Tuple[Dict[str, Any], Any]]:
        """``[(manifest entry, value)]`` of the kept inputs, every rule checked first (module doc);
        an archive's ``data/inputs/`` is extracted under ``scratch_dir`` and removed again."""
        manifest = self.inputs or {}
        problems = input_problems(manifest)
        if problems:
            raise OptionError(_OPTION, self.path, "bundle.json inputs: {}".format("; ".join(problems[:5])))
        with _as_option_error(self.path):
            if self.archive:
                os.makedirs(scratch_dir, exist_ok=True)
            with open_bundle(self.path, parts=(_INPUTS,), workdir=scratch_dir) as view:
                listed = {entry["path"] for entry in view.input_files(verify=True)}
                return [(entry, self._load(view, entry, listed)) for entry in manifest.get("tensors") or ()]

    def _load(self, view: BundleView, entry: Mapping[str, Any], listed: Any) -> Any:
        rel = entry["file"]
        where = "{}: data/{} (input {})".format(self.path, rel, entry["name"])
        if rel not in listed:
            raise OptionError(_OPTION, where, "is not a files[] entry of kind inputs (not read)")
        try:
            with open_regular(view.checked(rel)) as handle:
                value = np.load(handle, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise OptionError(_OPTION, where, "cannot be read as a .npy file: {}".format(exc)) from exc
        return value

    def identity(self) -> Dict[str, Any]:
        """``golden_for`` of the golden bundle (before the comparison result is added)."""
        return {"bundle_json_sha256": self.bundle_json_sha256, "path": self.path,
                "created": self.doc.get("created"), "backend": self.doc.get("backend"),
                "captured_step": self.captured_step}

    # -- the checkpoint -------------------------------------------------------------------
    def checkpoint_prefix(self, scratch_dir: str) -> str:
        """The restore prefix of the bundle's ``data/init/`` checkpoint, its files checked against
        bundle.json; archives are extracted (``data/init/`` only) under ``scratch_dir``."""
        self.close()
        with _as_option_error(self.path):
            if self.archive:
                os.makedirs(scratch_dir, exist_ok=True)
            self._view = view = open_bundle(self.path, parts=(_INIT,), workdir=scratch_dir)
            files = view.init_files(verify=True)  # every file present, regular, hashed: before any restore
            indexes = sorted(e["path"] for e in files if e["path"].endswith(".index"))
            if len(indexes) != 1:
                raise OptionError(_OPTION, self.path, "data/init/ holds {} checkpoint(s) (.index files), not "
                                                      "one".format(len(indexes)))
            return view.path(indexes[0][: -len(".index")])

    def close(self) -> None:
        """Close the bundle opened for its checkpoint (an archive's extraction is removed)."""
        view, self._view = self._view, None
        if view is not None:
            view.close()

    @staticmethod
    def checkpoint_variables(prefix: str) -> Dict[str, List[int]]:
        """``{variable name: shape}`` stored in the checkpoint at ``prefix``."""
        return {name: list(shape) for name, shape in _tf.tf_v1().train.list_variables(prefix)}


def check_variables(stored: Mapping[str, Sequence[int]], graph_variables: Sequence[Any]) -> Dict[str, List[str]]:
    """How the checkpoint's variables and the graph's global variables disagree:
    ``{"missing": in the graph, not the checkpoint, "extra": in the checkpoint only,
    "mismatched": shapes differ}`` (names sorted; all empty when they agree)."""
    graph = {v.op.name: v for v in graph_variables}
    mismatched = []
    for name in sorted(set(graph) & set(stored)):
        shape = graph[name].get_shape()
        if shape.is_fully_defined() and [int(d) for d in shape.as_list()] != list(stored[name]):
            mismatched.append(name)
    return {"missing": sorted(set(graph) - set(stored)), "extra": sorted(set(stored) - set(graph)),
            "mismatched": mismatched}


@contextlib.contextmanager
def _as_option_error(bundle: str) -> Iterator[None]:
    """A BundleError (not a bundle, hostile member or path, ...) as OptionError(initial_state)."""
    try:
        yield
    except BundleError as exc:
        raise OptionError(_OPTION, bundle, str(exc)) from exc
