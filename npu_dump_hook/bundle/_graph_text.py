"""The Build graph of a statistics bundle, kept gzip-compressed (docs/bundle-format.md rule 9).

A statistics bundle is a few kilobytes of CSV rows a dumped op, and its Build graph text (GE's
protobuf text, very repetitive) was most of it: 1.5 of the 2.42 points a stats bundle weighed
beside the full tensor bundle at a 7B model's ratio. The text compresses ~15:1 under gzip, so
statistics bundles store ``graph/<name>.txt.gz`` and record the text's own size and sha256::

    graph: {"file": "graph/ge_proto_..._Build.txt.gz", "text": {"compression": "gzip",
            "size": <bytes of the text>, "sha256": "<of the text>"}, ...}

    compress_graph(src, target)                 -> the ``text`` record (writer)
    stage_compressed_graph(data, rel, src)      -> (bundle path, local path, ``text`` record)
    expand_graph(src, target, text, where)      the text, bounded and checked (readers, verify)
    expansion_bound(compressed_bytes)           the most a member may expand to

A compressed member is someone else's bytes: :func:`expand_graph` stops as soon as the output
passes the listed size or :func:`expansion_bound` (ratio and absolute caps, checked while the
stream is decompressed, so a zip bomb costs at most the bound in CPU and never lands on disk
whole), writes into a temporary name renamed into place only when the size and sha256 match.
"""
import gzip
import hashlib
import os
import tempfile
import zlib
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .._files import open_regular
from ..errors import BundleError, FormatError, UnsafePathError
from .describe import graph_ops

__all__ = ["GRAPH_COMPRESSION", "GZIP_SUFFIX", "MAX_GRAPH_RATIO", "GRAPH_RATIO_FREE_BYTES", "MAX_GRAPH_TEXT_BYTES",
           "is_compressed", "compress_graph", "stage_compressed_graph", "expand_graph", "expansion_bound", "text_name", "graph_text_problems"]

GRAPH_COMPRESSION = "gzip"
GZIP_SUFFIX = ".gz"
#: GE graph text compresses 10-25:1 (measured 14-19:1 on the sample models' Build graphs); 200:1
#: only passes a stream of almost nothing but repeated bytes.
MAX_GRAPH_RATIO = 200
#: Below this the ratio is not applied: a small graph's text is cheap whatever its ratio.
GRAPH_RATIO_FREE_BYTES = 16 << 20
#: Never more than this, whatever the member's size (a 38B model's Build graph text is ~1 GB).
MAX_GRAPH_TEXT_BYTES = 16 << 30
_CHUNK = 1 << 20
_LEVEL = 6  # level 9 saves ~3% more for twice the time


def is_compressed(rel: Any) -> bool:
    """True for a bundle path naming a compressed graph (``*.gz``)."""
    return isinstance(rel, str) and rel.endswith(GZIP_SUFFIX)


def text_name(rel: str) -> str:
    """The file name of the graph text a compressed graph path holds (``x_Build.txt.gz`` -> ``x_Build.txt``)."""
    base = rel.rsplit("/", 1)[-1]
    return base[: -len(GZIP_SUFFIX)] if base.endswith(GZIP_SUFFIX) else base


def expansion_bound(compressed_bytes: int) -> int:
    """The most bytes a compressed graph of ``compressed_bytes`` may expand to."""
    return min(MAX_GRAPH_TEXT_BYTES, max(GRAPH_RATIO_FREE_BYTES, MAX_GRAPH_RATIO * compressed_bytes))


def compress_graph(src: str, target: str) -> Dict[str, Any]:
    """Write ``src`` gzip-compressed to ``target`` (no name or time in the gzip header: the same
    text always gives the same bytes); the ``graph.text`` record of bundle.json."""
    digest, size = hashlib.sha256(), 0
    with open_regular(src) as source, open(target, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=_LEVEL, mtime=0) as packed:
            for chunk in iter(lambda: source.read(_CHUNK), b""):
                digest.update(chunk)
                size += len(chunk)
                packed.write(chunk)
    return {"compression": GRAPH_COMPRESSION, "size": size, "sha256": digest.hexdigest()}


def stage_compressed_graph(data: str, rel: str, src: str) -> Tuple[str, str, Dict[str, Any]]:
    """The graph text ``src`` compressed under ``data`` (a staging data folder) at ``rel`` + ``.gz``:
    (its bundle path, its local path, the ``graph.text`` record)."""
    packed = rel + GZIP_SUFFIX
    target = os.path.join(data, *packed.split("/"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    return packed, target, compress_graph(src, target)


def expand_graph(src: str, target: str, text: Optional[Mapping[str, Any]], where: str) -> str:
    """Decompress the graph member ``src`` into ``target`` under the bounds of the module doc,
    checked against ``text`` (bundle.json ``graph.text``); ``target``. ``where`` names the member
    in errors (``<bundle>: data/graph/...``): UnsafePathError when it would expand past its bound,
    BundleError when it is not gzip or differs from ``text``. Nothing is left at ``target`` then."""
    listed = _listed_text(text, where)
    size = os.lstat(src).st_size
    bound = expansion_bound(size)
    limit = min(bound, listed["size"])
    partial = target + ".part"
    try:
        digest, written = _bounded_copy(src, partial, limit, where)
        if written > limit:
            if written > bound:
                raise UnsafePathError("{}: expands past {:,} bytes, the most a {:,}-byte gzip member may give "
                                      "(max({} MiB, {} x its size), at most {} GiB); refused as a decompression "
                                      "bomb".format(where, bound, size, GRAPH_RATIO_FREE_BYTES >> 20, MAX_GRAPH_RATIO,
                                                    MAX_GRAPH_TEXT_BYTES >> 30), where)
            raise BundleError("{}: expands past the {:,} bytes graph.text.size lists".format(where, listed["size"]),
                              where)
        if written != listed["size"] or digest != listed["sha256"]:
            raise BundleError("{}: expands to {:,} bytes of sha256 {}..., graph.text lists {:,} bytes of {}..."
                              .format(where, written, digest[:12], listed["size"], listed["sha256"][:12]), where)
        os.replace(partial, target)
    finally:
        if os.path.lexists(partial):
            os.unlink(partial)
    return target


def _listed_text(text: Optional[Mapping[str, Any]], where: str) -> Dict[str, Any]:
    """``graph.text`` when it is what section 2 says (a compressed graph without it cannot be checked)."""
    size = text.get("size") if isinstance(text, dict) else None
    digest = text.get("sha256") if isinstance(text, dict) else None
    if not isinstance(text, dict) or text.get("compression") != GRAPH_COMPRESSION or \
            not isinstance(size, int) or isinstance(size, bool) or size < 0 or \
            not isinstance(digest, str) or len(digest) != 64:
        raise BundleError("{}: a compressed graph needs bundle.json graph.text = {{\"compression\": \"gzip\", "
                          "\"size\": <int>, \"sha256\": <64 hex>}}; found {!r:.200}".format(where, text), where)
    return {"size": size, "sha256": digest}


def _bounded_copy(src: str, target: str, limit: int, where: str) -> Tuple[str, int]:
    """(sha256, bytes) of the decompressed ``src`` written to ``target``, stopping one byte past
    ``limit`` (the caller refuses then); BundleError when the stream is not gzip or is cut short."""
    digest, written = hashlib.sha256(), 0
    try:
        with open_regular(src) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as stream, \
                open(target, "wb") as out:
            while written <= limit:
                chunk = stream.read(min(_CHUNK, limit + 1 - written))
                if not chunk:
                    break
                digest.update(chunk)
                written += len(chunk)
                out.write(chunk)
    except (OSError, EOFError, zlib.error) as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise BundleError("{}: cannot be read or written: {}".format(where, exc.strerror or exc), where)
        raise BundleError("{}: is not a whole gzip stream: {}".format(where, exc), where)
    return digest.hexdigest(), written


def graph_text_problems(doc: Mapping[str, Any], present: Mapping[str, Any]) -> List[Tuple[str, str, str]]:
    """verify's check of a compressed graph (``present``: ``data/...`` -> the found file, with a
    ``path``): (problem kind, path, message) when ``graph.text`` is not as section 2 says
    (``schema``), the member would expand past its bound (``unsafe``), or it does not expand to
    the listed text or that text does not parse (``unparsable``). The text goes to a temporary
    folder removed before returning; nothing is written in the bundle."""
    graph = doc.get("graph")
    rel = graph.get("file") if isinstance(graph, dict) else None
    if not is_compressed(rel) or "data/" + rel not in present:
        return []  # an uncompressed graph is parsed with the payload; an absent one is reported there
    where = "data/" + rel
    with tempfile.TemporaryDirectory(prefix="npu_dump_hook-graph-") as scratch:
        try:
            _listed_text(graph.get("text"), where)
        except BundleError as exc:
            return [("schema", "data/bundle.json", str(exc))]
        try:
            text = expand_graph(present[where].path, os.path.join(scratch, text_name(rel)), graph["text"], where)
            if not _recorded_unparsable(doc, rel):  # the writer recorded (and warned) that it does not parse
                graph_ops(text)
        except UnsafePathError as exc:
            return [("unsafe", where, str(exc))]
        except BundleError as exc:
            return [("unparsable", where, str(exc))]
        except FormatError as exc:
            return [("unparsable", where, "its text: {}".format(exc.rule))]
    return []


def _recorded_unparsable(doc: Mapping[str, Any], rel: str) -> bool:
    files = doc.get("files") if isinstance(doc.get("files"), list) else []
    return any(isinstance(e, dict) and e.get("path") == rel and isinstance(e.get("parse_error"), str) for e in files)
