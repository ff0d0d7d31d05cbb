"""Bundles: write, describe, verify, read and index (contract: docs/bundle-format.md, DESIGN §5).

A bundle is a BagIt bag whose ``data/bundle.json`` (schema ``npu_dump_hook/bundle@1``)
describes the Build graph, the dump chain ``data/dump/{time}/{device_id}/{model_name}/
{model_id}/{step}/`` (original file names, mapping.csv kept), the TF graph, golden and
init files::

    write.py     write_bundle: plan, place + hash, stream bundle.json, tag files, one rename
    describe.py  what a file is (kind, parsed name, header summary), graph ops, coverage
    verify.py    verify_bundle: BagIt, schema, payload agreement, parse checks
    read.py      read_bundle (folder or archive), summarize
    index.py     write_rank_bundle / update_index / read_index: one root shared by ranks
    _spec.py     names and kinds the format fixes; the one bundle.json reader
    _archive.py  the one archive-suffix rule and tar-member check; pack / extract
    _bagit.py, _fs.py, _progress.py   BagIt files, safe paths + atomic staging, progress

Several processes (one per rank) may share one root: :func:`write_rank_bundle` writes
``{root}/rank_{rank}/`` and records it in ``{root}/index.json`` under a file lock.
"""
from ._archive import archive_format
from ._bagit import Problem
from ._spec import BACKENDS, BUNDLE_JSON, FILE_KINDS, INDEX_JSON, INDEX_SCHEMA
from ..constants import ARCHIVES, CHECKSUMS
from .describe import header_summary
from .index import rank_from_env, read_index, update_index, write_rank_bundle
from .read import read_bundle, summarize
from .verify import verify_bundle
from .write import BundleResult, write_bundle

__all__ = [
    "BundleResult",
    "Problem",
    "archive_format",
    "BACKENDS",
    "FILE_KINDS",
    "CHECKSUMS",
    "ARCHIVES",
    "BUNDLE_JSON",
    "INDEX_JSON",
    "INDEX_SCHEMA",
    "write_bundle",
    "verify_bundle",
    "read_bundle",
    "summarize",
    "header_summary",
    "write_rank_bundle",
    "update_index",
    "read_index",
    "rank_from_env",
]
