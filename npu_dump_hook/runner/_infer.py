"""The runner's online-inference entry points (``mode`` ``auto`` or ``infer``; see :mod:`._inject`).

::

    Estimator.predict / evaluate   hooks += [hook] when nothing has claimed the hook (a script that
                                   trains first claims it in train()); the session config carries
                                   the dump options while the call (predict: its generator) runs
    tf.compat.v1.Session           made with the dump options in its config (any session made while
                                   no hook is bound: ._sessions), claimed at its first inference run
                                   (:mod:`npu_dump_hook.train.inference`): a fed or iterator batch
                                   through the model's variables or weight constants; set-up and
                                   warm-up runs before it go on unclaimed; the hook's mode auto then
                                   dumps it unless the script built an optimizer (a loaded
                                   SavedModel's own does not count), in which case its training
                                   step is the one dumped
    MonitoredSession               made on a graph without training ops: hooks += [hook]

Nothing here imports TensorFlow: the patches run once the script has loaded it.
"""
import functools
import inspect
import logging
from typing import Any, Callable, Iterator, Optional

from .. import _tf

__all__ = ["RunVerdict", "run_verdict", "estimator_entry", "wants_inference"]

logger = logging.getLogger("npu_dump_hook.runner")


def wants_inference(settings: Any) -> bool:
    """Whether the runner's ``mode`` lets an inference entry point claim the hook."""
    return settings.hook_options.get("mode", "auto") != "train"


class RunVerdict(object):
    """What one candidate ``session.run`` is: ``restore`` (a Saver restore), ``iteration`` (an inference run)."""

    def __init__(self, restore: bool, iteration: bool) -> None:
        self.restore, self.iteration = restore, iteration


def run_verdict(graph: Any, fetches: Any, feed_dict: Any) -> RunVerdict:
    """The inference rule's verdict on a run of ``fetches`` with ``feed_dict`` on ``graph``."""
    from ..train.inference import InferenceDetector
    from ..train.walk import GraphIndex, StepWalk

    verdict = InferenceDetector(graph).verdict_for(StepWalk(GraphIndex(graph), fetches, feed_dict))
    return RunVerdict(verdict.restore, verdict.iteration)


def estimator_entry(injection: Any, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """``Estimator.predict``/``evaluate`` that claim the hook for an inference pass (else ``method``)."""

    signature = inspect.signature(method)

    @functools.wraps(method)
    def entry(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not (wants_inference(injection.settings) and injection._open()):  # noqa: SLF001 - the injection's own
            return method(self, *args, **kwargs)
        config = _tf.estimator_session_config(self)
        claim = injection._claim("Estimator." + name, config)  # noqa: SLF001
        if claim is None:
            return method(self, *args, **kwargs)
        hook, merged = claim
        bound = signature.bind(self, *args, **kwargs)
        bound.arguments["hooks"] = list(bound.arguments.get("hooks") or []) + [hook]
        if name == "predict":
            return _with_config(self, merged, config, lambda: method(*bound.args, **bound.kwargs))
        _tf.set_estimator_session_config(self, merged)
        try:
            return method(*bound.args, **bound.kwargs)
        finally:
            _tf.set_estimator_session_config(self, config)

    return entry


def _with_config(estimator: Any, merged: Any, config: Any, start: Callable[[], Iterator[Any]]) -> Iterator[Any]:
    """predict's lazy generator, run with the dump options in the session config (the graph and
    session are made at its first item); the script's config is back once it ends or is dropped."""
    _tf.set_estimator_session_config(estimator, merged)
    try:
        for item in start():
            yield item
    finally:
        _tf.set_estimator_session_config(estimator, config)


def restored_mark(session: Any, verdict: Optional[RunVerdict], attribute: str) -> bool:
    """Note on ``session`` that a run restored its variables; whether any run has."""
    if verdict is not None and verdict.restore:
        session.__dict__[attribute] = True
    return bool(session.__dict__.get(attribute))
