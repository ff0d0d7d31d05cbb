"""Which ops a ``dump_layer`` dump chose: the one definition the emulated NPU, the bundle's
``coverage``, ``inspect``, the golden run and ``compare`` share (docs/bundle-format.md,
``coverage``; docs/compare.md, "Partial dumps").

An op is *selected* when ``dump_layer`` is empty (every op is dumped), or its name or one of its
original TF op names (``_datadump_original_op_names``: a fused node is chosen through any of its
members) is one of ``dump_layer``'s space-separated names, as the adapter selects::

    layers = layer_names(bundle_doc)              # ["conv2/Conv2D", "pool1/MaxPool"]; [] = every op
    is_selected("conv2/Conv2Dconv2/Relu", ("conv2/Conv2D", "conv2/Relu"), layers)   # True

An op of the graph that is not selected and has no dump file is "not selected" (left out by
choice), never "missing": ``missing`` is only for a selected op without its dump file.
:func:`is_stats_options` says the other choice a dump's options make: statistics instead of
tensors (``dump_data="stats"``; such a bundle leaves out what serves tensor comparisons only).
"""
from typing import Any, Collection, Iterable, List, Mapping, Optional, Tuple

__all__ = ["is_stats_options", "layer_names", "layer_names_of_options", "is_selected", "chosen_counts",
           "selection_text"]


def layer_names_of_options(options: Any) -> List[str]:
    """The ``dump_layer`` names of an options mapping (bundle.json ``options``); [] when unset."""
    layer = options.get("dump_layer") if isinstance(options, Mapping) else None
    return layer.split() if isinstance(layer, str) else []


def is_stats_options(options: Any) -> bool:
    """The options mapping (bundle.json ``options``) asked for operator statistics (``dump_data="stats"``)."""
    return isinstance(options, Mapping) and options.get("dump_data") == "stats"


def layer_names(doc: Optional[Mapping[str, Any]]) -> List[str]:
    """The ``options.dump_layer`` names of a bundle document; [] (every op dumped) when unset."""
    return layer_names_of_options(doc.get("options") if isinstance(doc, Mapping) else None)


def is_selected(name: str, original_names: Optional[Iterable[str]], layers: Collection[str]) -> bool:
    """Whether the op ``name`` (its original TF op names ``original_names``) is dumped by choice
    under ``dump_layer`` names ``layers`` (empty: every op is)."""
    if not layers:
        return True
    return name in layers or any(original in layers for original in original_names or ())


def chosen_counts(cov: Mapping[str, Any]) -> Optional[Tuple[int, int, int]]:
    """``(chosen ops with dump files, chosen ops, ops not selected)`` of a bundle.json ``coverage``
    made under ``dump_layer``; None for a full dump."""
    selected, not_selected = cov.get("selected"), cov.get("not_selected")
    if not isinstance(selected, int) or not isinstance(not_selected, int):
        return None
    return selected - len(cov.get("missing") or []), selected, not_selected


def selection_text(cov: Mapping[str, Any]) -> str:
    """The coverage of a bundle.json ``coverage`` as one phrase: ``"2/120 ops of the graph have
    dump files"``, or for a ``dump_layer`` dump ``"2/2 chosen op(s) have dump files (dump_layer),
    118 not selected (not dumped by choice)"``."""
    counts = chosen_counts(cov)
    if counts is None:
        return "{}/{} ops of the graph have dump files".format(cov.get("dumped"), cov.get("expected"))
    text = "{}/{} chosen op(s) have dump files (dump_layer), {} not selected (not dumped by choice)".format(*counts)
    if cov.get("dumped") != counts[0]:
        text += "; {} op(s) with dump files in all (the chosen ops' Data inputs too)".format(cov.get("dumped"))
    return text
