"""Where a run's bundle goes and how it is written (``collect``, ``bundle_dir``, ``link``,
``checksum``, ``archive``, ``force``).

Contract (built by :mod:`npu_dump_hook.train.assembly`)::

    output = BundleOutput(collect, bundle_dir, made_dirs, writer)   # writer: link, checksum, archive, force
    output.collect                     # a bundle is written at end() (off on a rank that does not dump)
    output.copies                      # the bundle copies the dump files (the size check counts them)
    output.made_dirs                   # folders the hook created: removed again, when empty, after a refusal
    bundle = output.write(record, steps, guard)   # end(): the bundle of ``record``; None when it failed
                                                  # under strict=False (the guard logged it)

A SIGTERM while the bundle is written removes its staging folder (:mod:`npu_dump_hook._signals`).
"""
from typing import Any, Dict, List, Mapping, Sequence  # noqa: F401 (type comments)

from .._signals import terminating_cleanly
from ..collect import collect_run
from ..errors import NpuDumpError
from ..run_record import RunRecord
from .guard import FailureGuard

__all__ = ["BundleOutput"]


class BundleOutput(object):
    """The bundle this run writes at ``end()`` (see the module doc)."""

    def __init__(self, collect: bool, bundle_dir: str, made_dirs: Sequence[str], writer: Mapping[str, Any]) -> None:
        self.collect = collect
        self.bundle_dir = bundle_dir
        self.made_dirs = list(made_dirs)  # type: List[str]
        #: The bundle writer's keywords (:func:`npu_dump_hook.collect.collect_run`).
        self.writer = dict(writer)  # type: Dict[str, Any]

    @property
    def copies(self) -> bool:
        """The bundle holds copies of the dump files, not hard links: their bytes count twice."""
        return self.writer["link"] == "copy" or self.writer["archive"] is not None

    def write(self, record: RunRecord, steps: Any, guard: FailureGuard) -> Any:
        """The bundle of ``record`` (a :class:`~npu_dump_hook.bundle.BundleResult`), or None when
        writing it failed and ``guard`` is not strict; a run that counted no step has no bundle."""
        bundle = None
        with guard("collecting the bundle into {}".format(self.bundle_dir)):
            if not steps.steps_run:
                raise NpuDumpError(steps.nothing_counted())
            with terminating_cleanly():  # SIGTERM while collecting: the staging folder is removed
                bundle = collect_run(record, self.bundle_dir, **self.writer)
        return bundle
