"""Names and kinds that docs/bundle-format.md fixes, and the one reader of ``bundle.json``.

::

    <bundle>/bagit.txt  bag-info.txt  manifest-sha256.txt
    <bundle>/data/bundle.json          BUNDLE_JSON_PATH
    <bundle>/data/{graph,tf,dump,golden,init,inputs}/...
    <bundle>/data/golden/golden_manifest.json   GOLDEN_DIR, GOLDEN_MANIFEST
    {root}/index.json, {root}/rank_{N}/  (multi-rank roots)

``load_bundle_json`` (the one bounded bundle.json parser) lives in :mod:`._document`.

The golden backend is recorded as ``"reference"`` (:data:`GOLDEN_BACKEND`, what writers write);
readers take a recorded ``backend`` through :func:`read_backend`, which reads ``"golden"`` as it.
"""
from typing import Any

from ..constants import RECORDED_BACKEND_ALIASES, RECORDED_BACKENDS, RECORDED_GOLDEN_BACKEND
from ..formats.mapping_csv import MAPPING_FILE_NAME
from ._document import load_bundle_json

__all__ = ["DATA_DIR", "BUNDLE_JSON", "BUNDLE_JSON_PATH", "INDEX_JSON", "INDEX_SCHEMA", "MAPPING_FILE",
           "FILE_KINDS", "DUMP_NAME_FIELDS", "BACKENDS", "GOLDEN_BACKEND", "GOLDEN_DIR", "GOLDEN_MANIFEST",
           "INIT_DIR", "DUMP_DIR", "INPUTS_DIR", "VERIFIED_PARTS", "load_bundle_json", "read_backend"]

DATA_DIR = "data"
BUNDLE_JSON = "bundle.json"
BUNDLE_JSON_PATH = DATA_DIR + "/" + BUNDLE_JSON
INDEX_JSON = "index.json"
INDEX_SCHEMA = "npu_dump_hook/bundle-index@1"
MAPPING_FILE = MAPPING_FILE_NAME  # GE's name, defined with its format
#: Payload folders (under ``data/``) of the golden tensors, the initial-state checkpoint, the dump chain.
GOLDEN_DIR, INIT_DIR, DUMP_DIR = "golden", "init", "dump"
#: Payload folder of the captured step's input values (``.npy``; manifest: bundle.json ``inputs``).
INPUTS_DIR = "inputs"
#: Payload folders whose files are restored into a run: each needs a listed sha256, checked
#: before any of them is handed out (docs/bundle-format.md section 4).
VERIFIED_PARTS = (INIT_DIR, INPUTS_DIR)
#: The golden capture's manifest in ``data/golden/`` (written by the hook's golden capture).
GOLDEN_MANIFEST = "golden_manifest.json"
#: What bundle.json's ``backend`` may record (who wrote the data).
BACKENDS = RECORDED_BACKENDS
#: The recorded backend of golden bundles (``"reference"``): golden tensors, no graph and no
#: dump (coverage not applicable).
GOLDEN_BACKEND = RECORDED_GOLDEN_BACKEND
FILE_KINDS = ("dump", "stats", "opdebug", "mapping", "graph", "tf_graph", "golden", "init", "inputs", "other")
DUMP_NAME_FIELDS = ("op_type", "op_name", "task_id", "stream_id", "timestamp")


def read_backend(recorded: Any) -> Any:
    """A recorded ``backend`` as readers take it: an alias (``"golden"``) read as the value it
    names (``"reference"``); anything else unchanged."""
    return RECORDED_BACKEND_ALIASES.get(recorded, recorded) if isinstance(recorded, str) else recorded
