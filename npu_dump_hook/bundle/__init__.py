"""Bundles: write, describe, verify, read and index (contract: docs/bundle-format.md, docs/design.md §5).

A bundle is a BagIt bag whose ``data/bundle.json`` (schema ``npu_dump_hook/bundle@1``)
describes the Build graph, the dump chain ``data/dump/{time}/{device_id}/{model_name}/
{model_id}/{step}/`` (original file names, mapping.csv kept), the TF graph, golden and
init files::

    write.py     write_bundle: plan, place + hash, stream bundle.json, tag files, one rename
    describe.py  what a file is (kind, parsed name, header summary), graph ops, coverage
    verify.py    verify_bundle: BagIt, schema, payload agreement, parse checks
    view.py      open_bundle: the one way to open a bundle (folder or archive) for reading
    read.py      read_bundle (bundle.json, through open_bundle), summarize
    schema.py    the run and fingerprints sections' shape (the hook side imports it)
    index.py     write_rank_bundle / update_index / read_index: one root shared by ranks
    _spec.py     names and kinds the format fixes; the one bundle.json reader
    _archive.py  the one archive-suffix rule and tar-member check; pack / extract
    _bagit.py, _fs.py, _progress.py   BagIt files, safe paths + atomic staging, progress
    _listing.py  DumpListing: what write_bundle placed under data/dump (BundleResult.listing), for
                 the end-of-run checks in the same process, which check it against the folders

Other packages use the public names below only (never ``bundle._x``): ``open_bundle`` to
read, ``safe_join``/``safe_relpath``, ``sha256_file``, ``place_file``, ``archive_format``,
``looks_like_tar``, ``DumpListing`` (what a writer placed under data/dump, for a reader in
the same process, which checks it against the folders); ``walk_files``/``is_within`` (a tree's regular files, links out of it and special files
skipped and reported) and ``open_regular`` (open without following a link or blocking on a
FIFO) for readers of dump and golden folders.

Several processes (one per rank) may share one root: :func:`write_rank_bundle` writes
``{root}/rank_{rank}/`` and records it in ``{root}/index.json`` under a file lock.
"""
from ._archive import archive_format, looks_like_tar
from ._bagit import Problem
from ._listing import DumpListing
from ._fs import is_within, place_file, safe_join, safe_relpath, sha256_file, walk_files
from ._rules import open_regular
from ._spec import BACKENDS, BUNDLE_JSON, DATA_DIR, FILE_KINDS, GOLDEN_MANIFEST, INDEX_JSON, INDEX_SCHEMA
from ..constants import ARCHIVES, CHECKSUMS
from .describe import header_summary
from .index import rank_from_env, read_index, update_index, write_rank_bundle
from .read import read_bundle, summarize
from .verify import verify_bundle
from .view import BundleView, open_bundle
from .write import BundleResult, write_bundle

__all__ = [
    "BundleResult",
    "DumpListing",
    "Problem",
    "archive_format",
    "looks_like_tar",
    "open_bundle",
    "BundleView",
    "safe_join",
    "safe_relpath",
    "sha256_file",
    "walk_files",
    "is_within",
    "open_regular",
    "place_file",
    "DATA_DIR",
    "GOLDEN_MANIFEST",
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
