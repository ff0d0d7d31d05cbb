"""``DumpOptions``: the NPU dump options, validated with GE's strict rules.

No TensorFlow here. Validation runs at construction, before any training, in
this fixed order, and the first broken rule raises :class:`OptionError`
naming the option, the value and the rule:

1. flag types: ``enable_dump`` and ``enable_dump_debug`` are bools;
2. enumerations: ``dump_mode`` in input|output|all, ``dump_data`` in
   tensor|stats, ``dump_debug_mode`` in aicore_overflow|atomic_overflow|all;
3. ``enable_dump`` and ``enable_dump_debug`` are not both on (GE rejects it);
4. ``dump_step`` (read only with ``enable_dump``, as the adapter does) matches
   ``^\\d+(-\\d+)?(\\|\\d+(-\\d+)?)*$``, has at most 100 items, and every
   range ``a-b`` has ``a < b``;
5. ``dump_layer``: space-separated op names, not blank;
6. ``dump_path``: required when either flag is on; resolved against the
   working directory and recorded absolute; created with parents if missing;
   must be a readable and writable directory.

Sources: docs/reference/npu-bridge-dump-api.md §1.1 (parameters and defaults),
§1.2 (where the adapter and GE validate, and GE's dump_step rule).
"""
import dataclasses
import logging
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .constants import ENV_OPTIONS
from .errors import OptionError
from .settings import parse_flag  # the one on/off rule of every variable (re-exported)

__all__ = ["DumpOptions", "DUMP_MODES", "DUMP_DATA_KINDS", "DUMP_DEBUG_MODES", "MAX_DUMP_STEP_ITEMS"]

logger = logging.getLogger(__name__)
# Options that only mean something with a dump on: setting one with both flags off is a mistake.
_DATA_DUMP_FIELDS = ("dump_path", "dump_step", "dump_layer")
_NON_DEFAULT_FIELDS = {"dump_mode": "output", "dump_data": "tensor"}
_DEBUG_FIELDS = {"dump_debug_mode": "all"}

DUMP_MODES = ("input", "output", "all")
DUMP_DATA_KINDS = ("tensor", "stats")
DUMP_DEBUG_MODES = ("aicore_overflow", "atomic_overflow", "all")
MAX_DUMP_STEP_ITEMS = 100

_DUMP_STEP_RE = re.compile(r"^\d+(-\d+)?(\|\d+(-\d+)?)*$")


@dataclasses.dataclass(frozen=True)
class DumpOptions:
    """NPU data-dump and overflow options, mirroring npu_bridge's ``DumpConfig``.

    ``dump_step`` is a GE step string such as ``"0|5|10-20"`` (an ``int`` is
    accepted and stored as its string); ``None`` dumps every iteration.
    """

    enable_dump: bool = False
    dump_path: Optional[str] = None
    dump_step: Optional[str] = None
    dump_mode: str = "output"
    dump_layer: Optional[str] = None
    dump_data: str = "tensor"
    enable_dump_debug: bool = False
    dump_debug_mode: str = "all"

    def __post_init__(self) -> None:
        self._check_flags()
        self._check_enums()
        if self.enable_dump and self.enable_dump_debug:
            raise OptionError(
                "enable_dump_debug", True, "enable_dump and enable_dump_debug cannot both be on (GE rejects it)"
            )
        self._check_dump_step()
        self._check_dump_layer()
        self._check_dump_path()
        self._warn_if_nothing_dumps()

    # -- validation, in the documented order -------------------------------
    def _check_flags(self) -> None:
        for name in ("enable_dump", "enable_dump_debug"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise OptionError(name, value, "must be a bool (True or False)")

    def _check_enums(self) -> None:
        for name, allowed in (
            ("dump_mode", DUMP_MODES),
            ("dump_data", DUMP_DATA_KINDS),
            ("dump_debug_mode", DUMP_DEBUG_MODES),
        ):
            value = getattr(self, name)
            if value not in allowed:
                raise OptionError(name, value, "must be one of " + "|".join(allowed))

    def _check_dump_step(self) -> None:
        step = self.dump_step
        if step is None:
            return
        if isinstance(step, int) and not isinstance(step, bool) and step >= 0:
            object.__setattr__(self, "dump_step", str(step))
            return
        if not isinstance(step, str):
            raise OptionError("dump_step", step, "must be a string such as '0|5|10-20' (or a non-negative int)")
        if not _DUMP_STEP_RE.match(step):
            raise OptionError(
                "dump_step", step,
                "must match ^\\d+(-\\d+)?(\\|\\d+(-\\d+)?)*$ (e.g. '0|5|10-20'; no spaces, no empty items)",
            )
        items = step.split("|")
        if len(items) > MAX_DUMP_STEP_ITEMS:
            raise OptionError(
                "dump_step", step, "at most {} items, got {}".format(MAX_DUMP_STEP_ITEMS, len(items))
            )
        for item in items:
            if "-" in item:
                start, end = (int(x) for x in item.split("-"))
                if start >= end:
                    raise OptionError(
                        "dump_step", step, "range {!r} must have start < end".format(item)
                    )

    def _check_dump_layer(self) -> None:
        layer = self.dump_layer
        if layer is None:
            return
        if not isinstance(layer, str) or not layer.strip():
            raise OptionError("dump_layer", layer, "must be space-separated op names, not blank")

    def _check_dump_path(self) -> None:
        path = self.dump_path
        if not (self.enable_dump or self.enable_dump_debug):
            if path is not None:
                object.__setattr__(self, "dump_path", os.path.abspath(os.fspath(path)))
            return
        if path is None or not str(path).strip():
            flag = "enable_dump" if self.enable_dump else "enable_dump_debug"
            raise OptionError("dump_path", path, "required when {} is on".format(flag))
        absolute = os.path.abspath(os.path.expanduser(os.fspath(path)))
        if os.path.exists(absolute) and not os.path.isdir(absolute):
            raise OptionError("dump_path", path, "exists and is not a directory: " + absolute)
        try:
            os.makedirs(absolute, exist_ok=True)
        except OSError as exc:
            raise OptionError("dump_path", path, "cannot create {}: {}".format(absolute, exc.strerror))
        if not os.access(absolute, os.R_OK | os.W_OK | os.X_OK):
            raise OptionError("dump_path", path, "must be readable and writable: " + absolute)
        object.__setattr__(self, "dump_path", absolute)

    def _warn_if_nothing_dumps(self) -> None:
        if self.enabled:
            return
        given = [name for name in _DATA_DUMP_FIELDS if getattr(self, name) is not None]
        given += [name for name, default in dict(_NON_DEFAULT_FIELDS, **_DEBUG_FIELDS).items()
                  if getattr(self, name) != default]
        if given:
            logger.warning("DumpOptions: %s set but enable_dump and enable_dump_debug are off: nothing will be "
                           "dumped (pass enable_dump=True)", ", ".join(given))

    # -- derived views ------------------------------------------------------
    @property
    def enabled(self) -> bool:
        """True when data dump or overflow collection is on."""
        return self.enable_dump or self.enable_dump_debug

    @property
    def layers(self) -> Tuple[str, ...]:
        """``dump_layer`` split into op names (empty: every op)."""
        return tuple(self.dump_layer.split()) if self.dump_layer else ()

    def step_ranges(self) -> List[Tuple[int, int]]:
        """``dump_step`` as inclusive ``(start, end)`` ranges; empty list = every step."""
        if not self.dump_step:
            return []
        ranges = []
        for item in self.dump_step.split("|"):
            start, _, end = item.partition("-")
            ranges.append((int(start), int(end or start)))
        return ranges

    def dumps_step(self, step: int) -> bool:
        """Whether iteration ``step`` (0-based) is dumped under ``dump_step``."""
        ranges = self.step_ranges()
        return not ranges or any(a <= step <= b for a, b in ranges)

    def as_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> "DumpOptions":
        return dataclasses.replace(self, **changes)

    # -- construction from the environment ---------------------------------
    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "DumpOptions":
        """Build options from ``NPU_DUMP_*`` variables (see :mod:`npu_dump_hook.constants`).

        Unset variables keep the defaults; values are validated like constructor arguments,
        and an error names the variable. Any data-dump variable (``NPU_DUMP_PATH``, ``_STEP``,
        ``_MODE``, ``_LAYER``, ``_DATA``) switches the data dump on unless ``NPU_DUMP_ENABLE``
        says otherwise; ``NPU_DUMP_DEBUG_MODE`` likewise switches the overflow check on.
        """
        env = os.environ if environ is None else environ
        kwargs = {}  # type: Dict[str, Any]
        for field, var in ENV_OPTIONS.items():
            raw = env.get(var)
            if raw is None:
                continue
            if field in ("enable_dump", "enable_dump_debug"):
                kwargs[field] = parse_flag(var, raw)
            else:
                kwargs[field] = raw
        data_only = [f for f in ("dump_step", "dump_layer") + tuple(_NON_DEFAULT_FIELDS) if f in kwargs]
        debug = kwargs.get("enable_dump_debug", "dump_debug_mode" in kwargs and not data_only)
        if "enable_dump" not in kwargs and (data_only or "dump_path" in kwargs):
            kwargs["enable_dump"] = not debug  # NPU_DUMP_PATH serves both: the data dump unless debug is asked
        if "enable_dump_debug" not in kwargs and debug and not kwargs.get("enable_dump"):
            kwargs["enable_dump_debug"] = True
        try:
            return cls(**kwargs)
        except OptionError as exc:
            var = ENV_OPTIONS.get(exc.option, exc.option)
            raise OptionError(var, exc.value, exc.rule) from None
