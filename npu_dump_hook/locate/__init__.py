"""Find the GE Build graph and the dump folders of *this* run.

No TensorFlow here. Facts: docs/reference/npu-bridge-dump-api.md §5, §9;
docs/reference/ascend-dump-formats.md §1.1, §2.1, §2.5; the Ascend guide this project automates,
"准备NPU侧dump数据和计算图文件", step 2 "选取计算图文件":
https://www.hiascend.com/document/detail/zh/canncommercial/latest/devaids/ModelAccuracyAnalyzer/atlasaccuracy_16_0007.html

::

    graphs.py   graph folders GE writes to, Build graph files, the training graph choice
    dumps.py    {dump_path}/{time}/{device_id}/{model_name}/{model_id}/{step} folders
    _walk.py    small shared filesystem helpers

See :mod:`.graphs` and :mod:`.dumps` for the rules.
"""
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

from ..errors import LocateError
from ._walk import PathLike, local_time, unique
from .dumps import StepDir, find_step_dirs
from .graphs import (ENV_ASCEND_DUMP_PATH, expand_graph_dir, find_build_graphs, graph_search_dirs,
                     select_training_graph)

__all__ = [
    "ENV_ASCEND_DUMP_PATH",
    "StepDir",
    "LocatedRun",
    "graph_search_dirs",
    "expand_graph_dir",
    "find_build_graphs",
    "select_training_graph",
    "find_step_dirs",
    "locate_run",
]


@dataclass
class LocatedRun:
    """The graph file and dump folders of one run, and why they were chosen."""

    graph_file: str
    graph_name: str
    graph_choice: Dict[str, Any]
    dump_path: str
    steps: List[StepDir]
    warnings: List[str] = field(default_factory=list)


def locate_run(
    dump_path: PathLike,
    graph_dirs: Optional[Iterable[PathLike]] = None,
    since: Optional[float] = None,
    device_id: Optional[Union[int, str]] = None,
    graph_keyword: Optional[str] = None,
    tf_op_names: Optional[Iterable[str]] = None,
    environ: Optional[Mapping[str, str]] = None,
) -> LocatedRun:
    """Graph file, graph name and step folders of the run that began at ``since``.

    ``graph_dirs`` (each expanded with :func:`expand_graph_dir`) defaults to
    :func:`graph_search_dirs` of ``environ``; ``device_id`` also keeps only that device's
    per-process graph subfolders (multi-card runs write one per card). Symlinked folders
    below ``dump_path`` and inside the graph folders are never followed; each skipped link
    is named in ``warnings``.
    """
    notes = []  # type: List[str]
    if graph_dirs is None:
        dirs = graph_search_dirs(environ, device_id=device_id, warnings=notes)
    else:
        dirs = unique(d for root in graph_dirs for d in expand_graph_dir(root, device_id=device_id, warnings=notes))
    graphs = find_build_graphs(dirs, since, notes)
    if not graphs:
        raise LocateError(
            "no Build graph file (ge_proto_*_Build.txt) {}in: {}".format(
                "" if since is None else "modified at or after {} ".format(local_time(since)),
                ", ".join(dirs) or "no existing folder (set DUMP_GRAPH_PATH or pass graph_dirs=)"),
            dirs,
        )
    graph_file, choice = select_training_graph(graphs, tf_op_names, graph_keyword)
    graph_name = next(c["graph_name"] for c in choice["candidates"] if c.get("chosen"))
    warnings = notes + list(choice["warnings"])
    steps = find_step_dirs(dump_path, graph_name, since, device_id, warnings)
    return LocatedRun(graph_file, graph_name, choice, os.path.abspath(os.fspath(dump_path)),
                      steps, warnings)
