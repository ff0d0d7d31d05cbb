"""What the runner injects, read from the environment before the script starts (:class:`RunSettings`).

Every variable is checked at once, each by its row of the settings table
(:mod:`npu_dump_hook.settings`): an :class:`OptionError` names the variable and the rule its
text breaks, and the runner exits 2 before the script runs. ``NPU_DUMP_*`` are checked as
:meth:`DumpOptions.from_env` reads them.
"""
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from .. import settings
from ..constants import DUMP_OPTION_FLAGS, ENV_OPTIONS
from ..errors import NpuDumpError, OptionError
from ..options import DumpOptions

__all__ = ["RunSettings", "as_given"]


@dataclass(frozen=True)
class RunSettings:
    """What the runner injects.

    ``options``: the dump options; None lets the hook read ``NPU_DUMP_*`` (dumping into its
    run folder unless ``NPU_DUMP_PATH`` names one). ``hook_options``: keywords for
    :class:`NpuDumpHook`. ``stop``: what a plain session does after the dumped steps.
    ``log_level``: the package's log records go to stderr at that level (None: Python's default).
    ``enabled``: False injects nothing (``NPU_DUMP_HOOK_RUN=0``).
    ``keep_checkpoints``: a dump run trains and saves in the script's own folders, an
    Estimator's ``model_dir`` and every checkpoint folder (default: in ``{run folder}/model_dir``
    and ``{run folder}/checkpoints``, see :func:`~npu_dump_hook.runner._inject._redirect_model_dir`
    and :mod:`~npu_dump_hook.runner._checkpoints`; ignored by a golden run;
    ``NPU_DUMP_HOOK_KEEP_CHECKPOINTS=1``).
    """

    options: Optional[DumpOptions] = None
    hook_options: Mapping[str, Any] = field(default_factory=dict)
    stop: str = settings.SETTINGS["stop"].default
    log_level: Optional[str] = settings.SETTINGS["log_level"].default
    enabled: bool = settings.SETTINGS["run"].default
    keep_checkpoints: bool = settings.SETTINGS["keep_checkpoints"].default
    #: A script that ends without a bundle keeps its exit status (``NPU_DUMP_HOOK_ALLOW_NO_BUNDLE=1``).
    allow_no_bundle: bool = settings.SETTINGS["allow_no_bundle"].default
    #: A suspects file (``NPU_DUMP_HOOK_DUMP_LAYER_FROM``): ``dump_layer`` is its names (:meth:`dump_layer`).
    dump_layer_from: Optional[str] = settings.SETTINGS["dump_layer_from"].default

    def dump_layer(self) -> Optional[str]:
        """The ``dump_layer`` text :attr:`dump_layer_from` gives (None without one)."""
        if self.dump_layer_from is None:
            return None
        from ..suspects import dump_layer_of

        return dump_layer_of(self.dump_layer_from, settings.variable("dump_layer_from"))

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "RunSettings":
        """Read and check every variable the runner uses; an :class:`OptionError` names the variable.

        The ``NPU_DUMP_*`` values are checked as ``DumpOptions.from_env`` reads them, with a
        stand-in for an unset ``NPU_DUMP_PATH`` (the hook puts the run folder there).
        """
        env = os.environ if environ is None else environ
        enabled = settings.read("run", env)
        hook_options = settings.read_all(settings.HOOK, env)
        settings.check_combination(hook_options, spelled=settings.variable,
                                   given=lambda keyword: env[settings.variable(keyword)])
        stop = settings.read("stop", env)
        level = settings.read("log_level", env)
        layer_from = settings.read("dump_layer_from", env)
        _check_dump_variables(_with_layer(env, layer_from))
        keep = settings.read("keep_checkpoints", env)
        return cls(hook_options=hook_options, stop=stop, log_level=level, enabled=enabled, keep_checkpoints=keep,
                   allow_no_bundle=settings.read("allow_no_bundle", env), dump_layer_from=layer_from)


def _with_layer(env: Mapping[str, str], layer_from: Optional[str]) -> Mapping[str, str]:
    """``env`` with NPU_DUMP_LAYER from the suspects file ``layer_from``; OptionError when both are set
    to different ops (one choice of ops, not two)."""
    if layer_from is None:
        return env
    from ..suspects import dump_layer_of

    var = settings.variable("dump_layer_from")
    layer = dump_layer_of(layer_from, var)
    given = env.get(ENV_OPTIONS["dump_layer"])
    if given is not None and given.split() != layer.split():
        raise OptionError(var, layer_from, "names other ops than {}={!r}: give one of the two".format(
            ENV_OPTIONS["dump_layer"], given))
    return dict(env, **{ENV_OPTIONS["dump_layer"]: layer})


def _check_dump_variables(env: Mapping[str, str]) -> None:
    """``NPU_DUMP_*`` as the hook will read them, with a stand-in for an unset NPU_DUMP_PATH."""
    if any(var in env for var in ENV_OPTIONS.values()):
        import tempfile  # here: npu-dump-hook run's own process needs it only with NPU_DUMP_* set

        check = dict(env)
        check.setdefault(ENV_OPTIONS["dump_path"], tempfile.gettempdir())
        DumpOptions.from_env(check)


def as_given(exc: NpuDumpError, environ: Optional[Mapping[str, str]] = None) -> NpuDumpError:
    """``exc`` named as the user gave the option: an OptionError about a hook keyword or dump
    option whose variable is set becomes one about the ``run`` flag that set it (listed in
    ``NPU_DUMP_HOOK_FLAGS``) or else the variable, showing the text given (a value naming more,
    such as ``BUNDLE: data/inputs/x.npy``, is kept). Anything else is returned as it is: a hook made in
    Python keeps its keyword (``initial_state``)."""
    env = os.environ if environ is None else environ
    if not isinstance(exc, OptionError):
        return exc
    var = settings.ENV_RUN_HOOK_OPTIONS.get(exc.option) or ENV_OPTIONS.get(exc.option)
    if var is None or var not in env:
        return exc
    text = env[var]
    where = os.path.abspath(text) + ":"  # a value naming a file in the bundle at ``text``
    value = exc.value if isinstance(exc.value, str) and exc.value.startswith(where) else text
    flag = _flag_or_variable(exc.option, var, env)
    if flag != var and exc.option == "faults" and isinstance(exc.value, dict) and len(exc.value) == 1:
        value = settings.format_faults(exc.value)  # the one --fault (of several) that is wrong, as typed
    return OptionError(flag, value, exc.rule)


def _flag_or_variable(keyword: str, var: str, env: Mapping[str, str]) -> str:
    """The flag that set ``var`` (the settings table's, or the dump option's), or ``var`` itself
    when the run command did not set it."""
    if var not in env.get(settings.ENV_RUN_FLAGS, "").split():
        return var
    row = settings.SETTINGS.get(keyword)
    if row is None or row.env != var:
        return DUMP_OPTION_FLAGS.get(keyword, var)
    value = env[var]  # type: Any
    if row.parse is settings.parse_flag:  # on/off: --golden or --no-golden
        try:
            value = settings.parse_flag(var, value)
        except OptionError:
            pass
    return row.flag_for(value)
