"""The script's checkpoint folders stay the script's: a dump or golden run saves into its run folder.

Once the process's hook exists (:meth:`Injection._claim <npu_dump_hook.runner._inject.Injection._claim>`),
for the rest of the process, every folder of the script a checkpoint would be written into is
mapped to one under ``{run folder}/checkpoints`` (:class:`CheckpointRedirect`)::

    MonitoredTrainingSession(checkpoint_dir=D)  checkpoint_dir = the folder D maps to, seeded with a
                                                copy of D's latest checkpoint (its index, data shards
                                                and meta graph; the ``checkpoint`` state file names
                                                the copy), so the session restores from it as it
                                                would from D; its summaries, which default into
                                                checkpoint_dir, go along (a summary_dir of its own
                                                other than D stays). Golden run: not seeded (the
                                                hook restores the NPU bundle)
    CheckpointSaverHook(D).begin()              the hook's checkpoints, graph.pbtxt and events go to
                                                the folder D maps to
    Saver.save(sess, D/NAME, ...)               saved as {folder D maps to}/NAME (same base name),
                                                its new prefix returned; the checkpoints of other
                                                folders the Saver remembers (restored from D) are
                                                forgotten first, so max_to_keep never deletes them

The first folder of the script maps to ``{run folder}/checkpoints``, each other one to
``{run folder}/checkpoints/2``, ``/3``...; a path already inside the run folder (an Estimator's
redirected model_dir) is left alone. Each mapping is logged once (INFO, both paths). The
script's folders are never written to: D keeps its bytes. ``keep_checkpoints``
(``NPU_DUMP_HOOK_KEEP_CHECKPOINTS=1``) leaves a dump run in the script's folders; a golden run
always redirects. Nothing here imports TensorFlow: the patched methods run once the script has
loaded it (:data:`SAVER_MODULE`, :data:`SAVER_HOOK_MODULE`).
"""
import functools
import logging
import os
import shutil
import threading
from typing import Any, Callable, Dict, MutableMapping, Optional, Set

from .. import _tf

__all__ = ["CheckpointRedirect", "SAVER_MODULE", "SAVER_HOOK_MODULE", "CHECKPOINTS", "seed_from_latest",
           "redirecting_save", "redirecting_begin"]

logger = logging.getLogger("npu_dump_hook.runner")

#: Where ``tf.compat.v1.train.Saver`` is defined (TF 1.15 and 2.x).
SAVER_MODULE = "tensorflow.python.training.saver"
#: Where ``tf.compat.v1.train.CheckpointSaverHook`` is defined (TF 1.15 and 2.x).
SAVER_HOOK_MODULE = "tensorflow.python.training.basic_session_run_hooks"
#: The run folder's subfolder the script's checkpoints go to.
CHECKPOINTS = "checkpoints"


class CheckpointRedirect(object):
    """Which folder of the run folder each checkpoint folder of the script maps to (module docstring)."""

    def __init__(self, run_dir: str, golden: bool) -> None:
        self.run_dir = os.path.realpath(run_dir)
        self.root = os.path.join(self.run_dir, CHECKPOINTS)
        #: A golden run: nothing is seeded from the script's folders.
        self.golden = golden
        self._folders = {}  # type: Dict[str, str]
        self._seeded = set()  # type: Set[str]
        self._lock = threading.Lock()

    def owns(self, path: str) -> bool:
        """Whether ``path`` is inside the run folder."""
        real = os.path.realpath(os.path.abspath(path))
        return real == self.run_dir or real.startswith(self.run_dir + os.sep)

    def folder(self, user_dir: str, seed: bool = False) -> str:
        """The folder of the run folder that ``user_dir``'s checkpoints go to (made; with ``seed``,
        outside a golden run, holding a copy of ``user_dir``'s latest checkpoint)."""
        if self.owns(user_dir):
            return user_dir
        key = os.path.realpath(os.path.abspath(user_dir))
        with self._lock:
            target = self._folders.get(key)
            if target is None:
                target = self.root if not self._folders else os.path.join(self.root, str(len(self._folders) + 1))
                os.makedirs(target, exist_ok=True)
                self._folders[key] = target
                logger.info("npu_dump_hook: checkpoints the script writes into %s go to %s for this run; "
                            "%s is left as it was", user_dir, target, user_dir)
            if seed and not self.golden and key not in self._seeded:
                self._seeded.add(key)
                seed_from_latest(user_dir, target)
        return target

    def save_path(self, user_path: str) -> str:
        """Where ``Saver.save(sess, user_path)`` saves: the same base name in the mapped folder."""
        if self.owns(user_path):
            return user_path
        folder, base = os.path.split(os.path.abspath(user_path))
        return os.path.join(self.folder(folder), base)

    def training_session(self, arguments: MutableMapping[str, Any]) -> None:
        """Redirect the bound arguments of ``MonitoredTrainingSession`` (checkpoint_dir, and
        summary_dir when it is D or defaults into it)."""
        user_dir = arguments.get("checkpoint_dir")
        if not user_dir or self.owns(user_dir):
            return
        target = self.folder(user_dir, seed=True)
        summary_dir = arguments.get("summary_dir")
        if summary_dir and _same_folder(summary_dir, user_dir):
            arguments["summary_dir"] = target
        arguments["checkpoint_dir"] = target
        start = "the NPU bundle's state (golden run)" if self.golden else (
            _tf.latest_checkpoint(target) or "no checkpoint")
        logger.warning("npu_dump_hook: the MonitoredTrainingSession trains in %s for this run, starting from %s; "
                       "%s is left as it was%s", target, start, user_dir,
                       "" if summary_dir and not _same_folder(summary_dir, user_dir) else
                       " (its summaries go to the run folder too)")

    def saver_hook(self, hook: Any) -> None:
        """Point a ``CheckpointSaverHook`` (before its ``begin()``) at the mapped folder (TF 1.15 and
        2.x, private ``_checkpoint_dir`` and ``_save_path``)."""
        user_dir = getattr(hook, "_checkpoint_dir", None)
        save_path = getattr(hook, "_save_path", None)
        if not isinstance(user_dir, str) or not isinstance(save_path, str) or self.owns(user_dir):
            return
        target = self.folder(user_dir)
        hook._checkpoint_dir = target
        hook._save_path = os.path.join(target, os.path.basename(save_path))

    def forget_outside(self, saver: Any) -> None:
        """Drop the checkpoints outside the run folder from those ``saver`` keeps and deletes
        beyond ``max_to_keep`` (TF 1.15 and 2.x, private ``_last_checkpoints`` and
        ``_checkpoints_to_be_deleted``: lists of ``(prefix, time)``)."""
        for name in ("_last_checkpoints", "_checkpoints_to_be_deleted"):
            kept = getattr(saver, name, None)
            if isinstance(kept, list):
                ours = [entry for entry in kept if self.owns(_prefix(entry))]
                if len(ours) != len(kept):
                    logger.debug("npu_dump_hook: the Saver forgets %d checkpoint(s) of the script's folders "
                                 "(they are not the run's to delete)", len(kept) - len(ours))
                    setattr(saver, name, ours)


def _prefix(entry: Any) -> str:
    return str(entry[0] if isinstance(entry, tuple) else entry)


def _same_folder(a: str, b: str) -> bool:
    return os.path.realpath(os.path.abspath(a)) == os.path.realpath(os.path.abspath(b))


def seed_from_latest(source: str, target: str) -> Optional[str]:
    """Copy the files of ``source``'s latest checkpoint into ``target`` (never links: the script's
    bytes are not shared) and write a ``checkpoint`` state file naming the copy; returns the
    source prefix, or None when ``source`` holds no checkpoint. ``source`` is only read."""
    prefix = _tf.latest_checkpoint(source) if os.path.isdir(source) else None
    if not prefix:
        return None
    folder, base = os.path.split(prefix)
    for name in sorted(os.listdir(folder)):
        if name.startswith(base + ".") and not os.path.exists(os.path.join(target, name)):
            shutil.copyfile(os.path.join(folder, name), os.path.join(target, name))
    with open(os.path.join(target, "checkpoint"), "w") as handle:
        handle.write('model_checkpoint_path: "{0}"\nall_model_checkpoint_paths: "{0}"\n'.format(base))
    return prefix


Redirect = Callable[[], Optional[CheckpointRedirect]]


def redirecting_save(save: Callable[..., Any], redirect_for: Redirect) -> Callable[..., Any]:
    """``Saver.save`` that saves into the mapped folder while ``redirect_for()`` gives a redirect."""

    @functools.wraps(save)
    def wrapper(self: Any, sess: Any, save_path: Any, *args: Any, **kwargs: Any) -> Any:
        redirect = redirect_for()
        if redirect is not None and isinstance(save_path, (str, os.PathLike)):
            save_path = redirect.save_path(os.fspath(save_path))
            redirect.forget_outside(self)
        return save(self, sess, save_path, *args, **kwargs)

    return wrapper


def redirecting_begin(begin: Callable[[Any], Any], redirect_for: Redirect) -> Callable[[Any], Any]:
    """``CheckpointSaverHook.begin`` that first points the hook at the mapped folder."""

    @functools.wraps(begin)
    def wrapper(self: Any) -> Any:
        redirect = redirect_for()
        if redirect is not None:
            redirect.saver_hook(self)
        return begin(self)

    return wrapper
