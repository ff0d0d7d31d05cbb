"""Every keyword of the hook, the session wrapper and the runner, once: the settings table.

One row (:class:`Setting`) per keyword of :class:`~npu_dump_hook.hook.NpuDumpHook`,
:class:`~npu_dump_hook.session.NpuDumpSession` and the runner (:mod:`npu_dump_hook.runner`,
which ``npu-dump-hook run`` starts). A row says, for its keyword ``name``:

    owner       who takes it: HOOK (an NpuDumpHook keyword), SESSION (NpuDumpSession's own)
                or RUNNER (the runner's own)
    kind        what a value is, in words; ``default`` its value when it is not given
    env         the ``NPU_DUMP_HOOK_*`` variable the runner reads it from (None: not read)
    parse       ``parse(variable, text) -> value``: the variable's text checked and converted;
                an OptionError names the variable and the rule the text breaks
    check       ``check(value) -> rule or None``: the Python value's rule (:func:`check_keyword`),
                for keywords whose check is pure keyword logic; it must accept ``default`` (the
                hook checks every keyword as called, defaults included: :func:`check_hook_keywords`)
    choices     what the keyword accepts, when it is a fixed list (``choices()`` gives it;
                loaded when asked, so the emulator's lists load numpy only then)
    aliases     older spellings of values, each -> the value it stands for: accepted wherever
                the value is, and replaced by it where the value is read (:func:`canonical`)
    flag        the ``npu-dump-hook run`` flag that gives a value (True for an on/off keyword);
                ``negative`` the flag that gives False; ``help``/``negative_help`` their text;
                ``cli`` further argparse keywords; ``list_choices``: argparse lists ``choices``
    to_env      the flag's value as the variable's text (default: ``str``, True/False as 1/0)
    flag_aliases  older flags, each -> the flag (or negative) it stands for: the same argument
                under a second name, listed with the other aliases in ``run --help``

Names: the CPU/GPU tensors a comparison needs, and the run that makes them, are *golden*
(README "Names"): ``backend="golden"`` (alias ``"reference"``), ``--golden``/``--no-golden``
(aliases ``--reference``/``--no-reference``). The hook keyword ``reference=`` keeps its name
(capture the golden tensors), and so does its variable NPU_DUMP_HOOK_REFERENCE.

Combination rules (keywords that cannot go together) are functions over the given values,
in :data:`HOOK_RULES` (they accept a value and its aliases alike); :func:`check_combination`
reports a broken rule with the name the user typed: the keyword (hook), the variable (runner)
or, via the variable, the flag (CLI).

Built from the table: ``constants.ENV_RUN_HOOK_OPTIONS``, NpuDumpHook's keyword checks
(:func:`check_hook_keywords`), the runner's :meth:`~npu_dump_hook.runner.RunSettings.from_env`,
the ``run`` command's hook flags and the variables they set (:mod:`npu_dump_hook.cli`), and
NpuDumpSession's ``stop`` check.

Adding a keyword: one row here (plus a rule in :data:`HOOK_RULES` if it excludes another),
then the hook's signature, and its behaviour where it acts: the collaborator that
:mod:`npu_dump_hook.train.assembly` builds from it. A
row with ``env`` is read by the runner; with ``flag`` it is a ``run`` option as well.

This module imports nothing heavier than :mod:`npu_dump_hook.determinism` (no TensorFlow, no
numpy): the command line builds its parser from it, and :mod:`npu_dump_hook.constants`
re-exports its names.
"""
import argparse
import importlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ._cli_conventions import LOG_LEVELS
from .errors import OptionError

#: What ``randomness=`` accepts (their behaviour: :mod:`npu_dump_hook.determinism`).
POLICIES = ("audit", "pin", "strip", "error")
#: The seed ``pin``/``strip`` derive every op seed from: any fixed non-zero value (seed=seed2=0
#: means "random" to TensorFlow).
DEFAULT_SEED = 20221
#: The most bytes of captured-step input values an NPU run keeps for the golden run's replay
#: (``max_input_bytes``; above it only their hashes are kept).
DEFAULT_MAX_INPUT_BYTES = 256 << 20

__all__ = ["Setting", "SETTINGS", "HOOK", "SESSION", "RUNNER", "HOOK_KEYWORDS", "HOOK_RULES", "SESSION_RULES",
           "ENV_RUN", "ENV_RUN_STOP", "ENV_RUN_LOG_LEVEL", "ENV_RUN_KEEP_CHECKPOINTS", "ENV_RUN_ALLOW_NO_BUNDLE",
           "ENV_RUN_FLAGS", "ENV_RUN_HOOK_OPTIONS",
           "BACKEND_CHOICES", "GOLDEN_BACKEND", "MODES", "BACKEND_ALIASES", "ON_MISMATCH", "LINK_MODES", "CHECKSUMS",
           "ARCHIVES", "STOP_MODES", "DEFAULT_MAX_INPUT_BYTES", "FAULTS_SEPARATOR", "FAULT_OP_SEPARATOR", "rows",
           "variable", "read", "read_all",
           "canonical", "check_keyword", "check_hook_keywords", "check_combination", "parse_flag", "parse_faults",
           "format_faults",
           "parse_size"]

HOOK, SESSION, RUNNER = "hook", "session", "runner"

#: The runner's switch: set to a false value, ``python -m npu_dump_hook.runner`` injects nothing.
ENV_RUN = "NPU_DUMP_HOOK_RUN"
#: Plain-session scripts under the runner: ``exit`` (default) or ``continue`` after the dumped steps.
ENV_RUN_STOP = "NPU_DUMP_HOOK_STOP"
#: Level of the package's log records the runner prints on stderr (unset: Python's default, warnings).
ENV_RUN_LOG_LEVEL = "NPU_DUMP_HOOK_LOG_LEVEL"
#: "1": an Estimator script under the runner trains in its own model_dir (default: the run folder's).
ENV_RUN_KEEP_CHECKPOINTS = "NPU_DUMP_HOOK_KEEP_CHECKPOINTS"
#: "1": a script that ends without a bundle while one was asked for exits with its own status
#: (default: ``EXIT_NO_BUNDLE`` of :mod:`npu_dump_hook._cli_conventions` when it would exit 0).
ENV_RUN_ALLOW_NO_BUNDLE = "NPU_DUMP_HOOK_ALLOW_NO_BUNDLE"
#: The variables ``npu-dump-hook run`` set from its flags (space-separated): an error names the flag.
ENV_RUN_FLAGS = "NPU_DUMP_HOOK_FLAGS"

#: The golden run's backend: the CPU/GPU (golden) tensors only, no NPU dump, usually with
#: ``initial_state=`` an NPU bundle. bundle.json records it as ``"reference"``
#: (:data:`~npu_dump_hook.constants.RECORDED_GOLDEN_BACKEND`).
GOLDEN_BACKEND = "golden"
#: Older spellings of ``backend=`` values, each the same as the value it names.
BACKEND_ALIASES = {"reference": GOLDEN_BACKEND}  # type: Mapping[str, str]
#: What ``backend=`` (hook) and ``--backend`` (CLI) accept: the values, then their aliases.
BACKEND_CHOICES = ("auto", "npu", "emulated", GOLDEN_BACKEND) + tuple(BACKEND_ALIASES)
#: What a golden run does when its fingerprints differ from the NPU bundle's (``on_mismatch=``).
ON_MISMATCH = ("error", "warn")
#: How payload files enter a bundle (``link=``, ``--link``).
LINK_MODES = ("auto", "hardlink", "copy")
#: Payload checksums (``checksum=``, ``--checksum``).
CHECKSUMS = ("sha256", "none")
#: Archive formats a bundle can be packed into (``archive=``, ``--archive``).
ARCHIVES = ("tar", "tar.gz")
#: Which runs are the iteration (``mode=``, ``--mode``): ``auto`` (training steps when the script
#: trains, else the first inference run), ``train`` or ``infer`` (:mod:`npu_dump_hook.train.inference`).
MODES = ("auto", "train", "infer")
#: What ``NpuDumpSession(stop=)``, ``--stop`` and NPU_DUMP_HOOK_STOP accept.
STOP_MODES = ("exit", "continue")
#: NPU_DUMP_HOOK_FAULTS: what separates its ``OP=SPEC`` entries, and an entry's op from its spec.
FAULTS_SEPARATOR = ";"
FAULT_OP_SEPARATOR = "="

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


# --------------------------------------------------------------------------- parsing a variable


def parse_flag(var: str, raw: str) -> bool:
    """An on/off environment variable: 1/true/yes/on or 0/false/no/off (empty: off); OptionError naming ``var``."""
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise OptionError(var, raw, "must be one of 1/true/yes/on or 0/false/no/off")


def _integer(minimum: Optional[int]) -> Callable[[str, str], int]:
    def parse(var: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise OptionError(var, raw, "must be an integer") from None
        if minimum is not None and value < minimum:
            raise OptionError(var, raw, "must be at least {}".format(minimum))
        return value
    return parse


def _one_of_rule(allowed: Sequence[str]) -> str:
    return "must be one of " + "|".join(allowed)


def _one_of(choices: Callable[[], Sequence[str]], upper: bool = False) -> Callable[[str, str], str]:
    def parse(var: str, raw: str) -> str:
        value = raw.upper() if upper else raw
        allowed = tuple(choices())
        if value not in allowed:
            raise OptionError(var, value, _one_of_rule(allowed))
        return value
    return parse


def _text(var: str, raw: str) -> str:
    if not raw.strip():
        raise OptionError(var, raw, "must not be blank")
    return raw


def _ranks(var: str, raw: str) -> Tuple[int, ...]:
    items = raw.replace(",", " ").split()
    if not items or not all(item.isdigit() for item in items):
        raise OptionError(var, raw, "must be rank numbers separated by commas, e.g. 0,1")
    return tuple(int(item) for item in items)


def _existing_path(var: str, raw: str) -> str:
    """A path that exists now, made absolute (the script may change directory before the hook reads it)."""
    if not raw.strip():
        raise OptionError(var, raw, "must not be blank")
    if not os.path.exists(raw):
        raise OptionError(var, raw, "no such file or folder (an NPU bundle folder or .tar/.tar.gz archive)")
    return os.path.abspath(raw)


def _suspects_file(var: str, raw: str) -> str:
    """A suspects file (compare --suspects-out) that reads and checks, made absolute."""
    if not raw.strip():
        raise OptionError(var, raw, "must not be blank")
    _read_suspects()(raw, var)
    return os.path.abspath(raw)


def _lazy(module: str, name: str) -> Callable[[], Any]:
    """``name`` of ``module``, imported when first asked for.

    For the emulator's lists and fault grammar: the emulator loads numpy and imports
    :mod:`npu_dump_hook.constants`, which re-exports this module, so it cannot be imported here.
    """
    return lambda: getattr(importlib.import_module(module), name)


_precisions = _lazy("npu_dump_hook.emulator.backend", "PRECISIONS")
_profiles = _lazy("npu_dump_hook.emulator.backend", "PROFILES")
_parse_fault = _lazy("npu_dump_hook.emulator.numerics", "parse_fault")
_read_suspects = _lazy("npu_dump_hook.suspects", "read_suspects")  # when a suspects file is given only


def _fixed(values: Sequence[str]) -> Callable[[], Sequence[str]]:
    return lambda: values


def parse_faults(raw: str, var: str = "NPU_DUMP_HOOK_FAULTS") -> Dict[str, str]:
    """``{"op name": spec}`` from the one-variable encoding of ``faults=`` (see
    :mod:`npu_dump_hook.constants`, NPU_DUMP_HOOK_FAULTS): ``OP=SPEC`` entries separated by
    ``;``, OP everything before an entry's first ``=``. Each spec is checked as the emulator
    checks it; an :class:`OptionError` on ``var`` names the entry and the rule it breaks."""
    faults = {}  # type: Dict[str, str]
    for entry in raw.split(FAULTS_SEPARATOR):
        if not entry.strip():
            continue
        op, sep, spec = (part.strip() for part in entry.partition(FAULT_OP_SEPARATOR))
        if not sep or not op or not spec:
            raise OptionError(var, raw, "entry {!r} is not OP=SPEC (e.g. conv2/Conv2D=scale=1.05; entries "
                                        "separated by '{}')".format(entry.strip(), FAULTS_SEPARATOR))
        if op in faults:
            raise OptionError(var, raw, "op {!r} is given twice".format(op))
        try:
            _parse_fault()(op, spec)
        except OptionError as exc:
            raise OptionError(var, raw, "entry {!r}: {}".format(entry.strip(), exc.rule)) from None
        faults[op] = spec
    if not faults:
        raise OptionError(var, raw, "names no fault: give OP=SPEC entries separated by '{}'".format(FAULTS_SEPARATOR))
    return faults


def format_faults(faults: Mapping[str, str]) -> str:
    """The NPU_DUMP_HOOK_FAULTS text of ``faults`` (the inverse of :func:`parse_faults`); an op
    name holding ``;`` or ``=`` cannot be encoded (no TF op name does): OptionError("faults")."""
    entries = []
    for op, spec in faults.items():
        if FAULTS_SEPARATOR in op or FAULT_OP_SEPARATOR in op or FAULTS_SEPARATOR in spec:
            raise OptionError("faults", {op: spec}, "an op name holds neither '{}' nor '{}', a spec no '{}'".format(
                FAULTS_SEPARATOR, FAULT_OP_SEPARATOR, FAULTS_SEPARATOR))
        entries.append(op + FAULT_OP_SEPARATOR + spec)
    return FAULTS_SEPARATOR.join(entries)


#: ``max_dump_size`` units (powers of 1024).
_SIZE_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE_RULE = "must be a byte count >= 0 or a size such as 500M or 2G (K, M, G, T: powers of 1024)"


def parse_size(text: Any, option: str = "max_dump_size") -> int:
    """Bytes from an int or a text such as ``500M``, ``2G``, ``1.5T``, ``4096`` (powers of 1024;
    a trailing ``B``/``iB`` allowed); OptionError naming ``option`` otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise OptionError(option, text, _SIZE_RULE)
        return text
    raw = text.strip().upper() if isinstance(text, str) else ""
    for suffix in ("IB", "B"):
        if raw.endswith(suffix) and raw[:-len(suffix)][-1:] in ("K", "M", "G", "T"):
            raw = raw[:-len(suffix)]
    unit = raw[-1] if raw and raw[-1] in _SIZE_UNITS else ""
    number = raw[:-1] if unit else raw
    if number and number.replace(".", "", 1).isdigit():
        return int(float(number) * _SIZE_UNITS[unit])
    raise OptionError(option, text, _SIZE_RULE)


def _size_argument(text: str) -> int:
    """argparse's ``type`` for ``--max-dump-size``: bytes, or argparse's own error naming the rule."""
    try:
        return parse_size(text, "--max-dump-size")
    except OptionError as exc:
        raise argparse.ArgumentTypeError("{!r} {}".format(text, exc.rule)) from None


def _size_or_none(value: Any) -> Optional[str]:
    if value is None:
        return None
    try:
        parse_size(value)
    except OptionError as exc:
        return exc.rule
    return None


# --------------------------------------------------------------------------- checking a Python value


def _non_negative_int(value: Any) -> Optional[str]:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return None
    return "must be an int >= 0 (bytes)"


def _positive_int(value: Any) -> Optional[str]:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return None
    return "must be a positive int"


def _member(choices: Callable[[], Sequence[str]]) -> Callable[[Any], Optional[str]]:
    def check(value: Any) -> Optional[str]:
        allowed = tuple(choices())
        return None if value in allowed else _one_of_rule(allowed)
    return check


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Setting:
    """One keyword: what it is, where it comes from, how it is checked (see the module docstring)."""

    name: str
    owner: str
    kind: str
    default: Any
    help: str
    env: Optional[str] = None
    parse: Optional[Callable[[str, str], Any]] = None
    check: Optional[Callable[[Any], Optional[str]]] = None
    choices: Optional[Callable[[], Sequence[str]]] = None
    flag: Optional[str] = None
    negative: Optional[str] = None
    negative_help: Optional[str] = None
    cli: Mapping[str, Any] = field(default_factory=dict)
    list_choices: bool = False
    to_env: Optional[Callable[[Any], str]] = None
    aliases: Mapping[str, str] = field(default_factory=dict)
    flag_aliases: Mapping[str, str] = field(default_factory=dict)

    def canonical(self, value: Any) -> Any:
        """``value``, or the value it stands for when it is one of :attr:`aliases`."""
        return self.aliases.get(value, value) if isinstance(value, str) else value

    def flag_for(self, value: Any) -> str:
        """The flag that gave ``value`` (the negative one for False)."""
        if value is False and self.negative:
            return self.negative
        return self.flag or self.negative or self.name

    def variable_text(self, value: Any) -> str:
        """A flag's ``value`` as the text of :attr:`env`."""
        if self.to_env is not None:
            return self.to_env(value)
        if isinstance(value, bool):
            return "1" if value else "0"
        return str(value)


def _choice(name: str, owner: str, choices: Sequence[str], default: Any, help: str, **more: Any) -> Setting:
    """A keyword whose value is one of a fixed list (listed by argparse too)."""
    listed = _fixed(choices)
    return Setting(name, owner, "one of " + "|".join(choices), default, help, env=_hook_variable(name),
                   parse=_one_of(listed), choices=listed, flag=_flag_name(name), list_choices=True, **more)


def _on_off(name: str, default: Any, help: str, **more: Any) -> Setting:
    """An on/off hook keyword (variable 1/0 and the like)."""
    return Setting(name, HOOK, "bool", default, help, env=_hook_variable(name), parse=parse_flag,
                   cli={"action": "store_true", "default": None}, **more)


def _hook_variable(name: str) -> str:
    return "NPU_DUMP_HOOK_" + name.upper()


def _flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


_ROWS = [
    Setting("max_steps", HOOK, "int >= 1", None,
            "training steps before the run is stopped (default: 1, or what --dump-step needs)",
            env=_hook_variable("max_steps"), parse=_integer(1), check=_positive_int, flag="--max-steps",
            cli={"type": int}),
    Setting("mode", HOOK, "one of " + "|".join(MODES), "auto",
            "which run is the dumped iteration: training steps (train), the first run of the model on an input "
            "batch (infer: online inference), or auto (default: train when the script trains, else infer)",
            env=_hook_variable("mode"), parse=_one_of(_fixed(MODES)), check=_member(_fixed(MODES)),
            choices=_fixed(MODES), flag="--mode", list_choices=True),
    Setting("randomness", HOOK, "one of " + "|".join(POLICIES), "strip", "randomness policy (default strip)",
            env=_hook_variable("randomness"), parse=_one_of(_fixed(POLICIES)), check=_member(_fixed(POLICIES)),
            choices=_fixed(POLICIES), flag="--randomness", list_choices=True),
    Setting("seed", HOOK, "int", DEFAULT_SEED, "seed the pin/strip policies derive op seeds from",
            env=_hook_variable("seed"), parse=_integer(None), flag="--seed", cli={"type": int}),
    _choice("backend", HOOK, BACKEND_CHOICES, "auto",
            "npu, emulated, golden (the golden run: golden tensors only, no dump; alias reference), or auto "
            "(default: npu when npu_bridge imports)", aliases=BACKEND_ALIASES),
    Setting("emulate_precision", HOOK, "fp32|fp16", "fp32", "emulated backend: fp32 (default) or fp16",
            env=_hook_variable("emulate_precision"), parse=_one_of(_precisions), choices=_precisions,
            flag="--emulate-precision"),
    Setting("emulate_profile", HOOK, "exact|ascend", None,
            "emulated backend: exact (default: fp32, everything equal) or ascend (float16 Cube ops, GE fusion, "
            "device formats)",
            env=_hook_variable("emulate_profile"), parse=_one_of(_profiles), choices=_profiles,
            flag="--emulate-profile"),
    Setting("faults", HOOK, "{op name: spec}", None,
            "emulated backend: a wrong kernel in op OP, SPEC scale=X, add_noise=S, nondeterministic=S, overflow or nan "
            "(repeat for more ops; e.g. conv2/Conv2D=scale=1.05)",
            env=_hook_variable("faults"), parse=lambda var, raw: parse_faults(raw, var), flag="--fault",
            cli={"action": "append", "metavar": "OP=SPEC"}, to_env=FAULTS_SEPARATOR.join),
    Setting("initial_state", HOOK, "path of an NPU bundle", None,
            "the golden run of NPU_BUNDLE: backend golden, its initial state restored before its captured step, "
            "fingerprints checked (same script, on a CPU/GPU machine)",
            env=_hook_variable("initial_state"), parse=_existing_path, flag="--golden-for",
            cli={"metavar": "NPU_BUNDLE"}),
    Setting("on_mismatch", HOOK, "one of " + "|".join(ON_MISMATCH), "error",
            "golden run whose state or batch differs from NPU_BUNDLE's: fail before writing (error, default) or "
            "write the bundle with the differences (warn)",
            env=_hook_variable("on_mismatch"), parse=_one_of(_fixed(ON_MISMATCH)), check=_member(_fixed(ON_MISMATCH)),
            choices=_fixed(ON_MISMATCH), flag="--on-mismatch", list_choices=True),
    _on_off("reference", None, "capture the golden (CPU/GPU) tensors (default: with the emulated and golden "
            "backends)", flag="--golden", negative="--no-golden", negative_help="do not capture them",
            flag_aliases={"--reference": "--golden", "--no-reference": "--no-golden"}),
    Setting("max_input_bytes", HOOK, "int >= 0", DEFAULT_MAX_INPUT_BYTES,
            "bytes of the dumped step's input values kept for the golden run's replay (default 256 MiB; above: "
            "hashes only, and the golden run cannot replay)",
            env=_hook_variable("max_input_bytes"), parse=_integer(0), check=_non_negative_int,
            flag="--max-input-bytes", cli={"type": int, "metavar": "BYTES"}),
    Setting("max_dump_size", HOOK, "bytes or a size such as 500M, 2G", None,
            "refuse the dump before the dumped step when its estimate exceeds SIZE (500M, 2G; default: only "
            "the free space limits it; strict=False: warn and dump)",
            env=_hook_variable("max_dump_size"), parse=lambda var, raw: parse_size(raw, var), check=_size_or_none,
            flag="--max-dump-size", cli={"type": _size_argument, "metavar": "SIZE"}),
    _on_off("replay_inputs", True, "golden run: feed the NPU bundle's kept input values into the same tensors "
            "at its captured step (default)", flag="--replay-inputs", negative="--no-replay-inputs",
            negative_help="golden run: let the script make its own batch (fingerprints show whether it matches)"),
    _on_off("save_initial_state", True, "checkpoint the variables before the dumped step",
            negative="--no-initial-state", negative_help="do not checkpoint the variables before the dumped step"),
    Setting("output_dir", HOOK, "folder", None, "where run folders go (default ./npu_dump_hook_out)",
            env=_hook_variable("output_dir"), parse=_text, flag="--output-dir", to_env=os.path.abspath),
    Setting("bundle_dir", HOOK, "folder", None, "where bundles go (default OUTPUT_DIR/bundles)",
            env=_hook_variable("bundle_dir"), parse=_text, flag="--bundle-dir", to_env=os.path.abspath),
    _on_off("strict", True, "a failure of the hook's own work fails the script (default)",
            flag="--strict", negative="--no-strict", negative_help="log such failures and let training carry on"),
    Setting("ranks", HOOK, "rank numbers", None, "ranks (RANK_ID) that dump, e.g. 0,1 (default: every rank)",
            env=_hook_variable("ranks"), parse=_ranks, flag="--ranks"),
    Setting("graph_keyword", HOOK, "op name", None, "op name that only the training graph contains",
            env=_hook_variable("graph_keyword"), parse=_text, flag="--graph-keyword"),
    _choice("link", HOOK, LINK_MODES, "auto", "hard-link dump files into the bundle or copy them"),
    _choice("checksum", HOOK, CHECKSUMS, "sha256", "record sha256 per file in bundle.json (default)"),
    _choice("archive", HOOK, ARCHIVES, None, "also pack the bundle into an archive"),
    # hook keywords the runner does not read
    Setting("collect", HOOK, "bool", True, "at end(), locate this run's graph and dump and write a bundle"),
    Setting("verbose", HOOK, "bool", True, "the summary line at the end also on stderr when logging hides INFO (False: INFO log only)"),
    Setting("force", HOOK, "bool", False, "replace an existing bundle at the destination"),
    Setting("restore_initial_state", HOOK, "bool", True,
            "golden run: restore the NPU bundle's checkpoint (False: only compare fingerprints)"),
    # NpuDumpSession's own
    Setting("stop", SESSION, "one of " + "|".join(STOP_MODES), "exit",
            "plain sessions after the dumped step: end the script with status 0 (exit, default) or train on "
            "(continue)",
            env=ENV_RUN_STOP, parse=_one_of(_fixed(STOP_MODES)), check=_member(_fixed(STOP_MODES)),
            choices=_fixed(STOP_MODES), flag="--stop", list_choices=True),
    Setting("hook", SESSION, "NpuDumpHook", None, "a hook made beforehand, instead of options and hook options"),
    # the runner's own
    Setting("run", RUNNER, "bool", True, "0/false/...: the runner runs the script without injecting anything",
            env=ENV_RUN, parse=parse_flag),
    Setting("log_level", RUNNER, "one of " + "|".join(LOG_LEVELS), None,
            "the package's log records on stderr at that level (the CLI's -v/-q/--debug)",
            env=ENV_RUN_LOG_LEVEL, parse=_one_of(_fixed(LOG_LEVELS), upper=True), choices=_fixed(LOG_LEVELS)),
    Setting("keep_checkpoints", RUNNER, "bool", False,
            "a dump run trains and saves in the script's own folders (default: {run folder}/model_dir and "
            "{run folder}/checkpoints); ignored by a golden run",
            env=ENV_RUN_KEEP_CHECKPOINTS, parse=parse_flag),
    Setting("dump_layer_from", RUNNER, "suspects file", None,
            "dump only the ops of FILE (compare --suspects-out): sets dump_layer to its names, a data dump",
            env="NPU_DUMP_HOOK_DUMP_LAYER_FROM", parse=_suspects_file, flag="--dump-layer-from",
            cli={"metavar": "FILE"}),
    Setting("allow_no_bundle", RUNNER, "bool", False,
            "a script that ends without a bundle keeps its exit status (default: status 4 instead of 0 when "
            "the dump found no training step to bundle)",
            env=ENV_RUN_ALLOW_NO_BUNDLE, parse=parse_flag, flag="--allow-no-bundle",
            cli={"action": "store_true", "default": None}),
]  # type: List[Setting]

#: keyword -> its row, in table order (the ``run`` command's help order).
SETTINGS = {row.name: row for row in _ROWS}  # type: Mapping[str, Setting]
#: Every NpuDumpHook keyword (its first argument, the dump options, is :class:`DumpOptions`'s).
HOOK_KEYWORDS = tuple(row.name for row in _ROWS if row.owner == HOOK)
#: NpuDumpHook keyword -> environment variable read by npu_dump_hook.runner.
ENV_RUN_HOOK_OPTIONS = {row.name: row.env for row in _ROWS if row.owner == HOOK and row.env}  # type: Dict[str, str]


def rows(owner: Optional[str] = None) -> List[Setting]:
    """The rows of ``owner`` (None: all), in table order."""
    return [row for row in _ROWS if owner is None or row.owner == owner]


def variable(name: str) -> str:
    """The environment variable of keyword ``name``."""
    var = SETTINGS[name].env
    if var is None:
        raise KeyError("{} is not read from the environment".format(name))
    return var


def read(name: str, environ: Mapping[str, str]) -> Any:
    """Keyword ``name`` from its variable in ``environ`` (unset or empty: the default); an
    alias spelling is read as the value it stands for."""
    row = SETTINGS[name]
    raw = environ.get(variable(name))
    return row.canonical(row.parse(row.env, raw)) if raw and row.parse is not None else row.default


def canonical(name: str, value: Any) -> Any:
    """``value`` of keyword ``name``, an alias spelling replaced by the value it stands for
    (``canonical("backend", "reference") == "golden"``); anything else unchanged."""
    return SETTINGS[name].canonical(value)


def read_all(owner: str, environ: Mapping[str, str]) -> Dict[str, Any]:
    """``{keyword: value}`` of every variable of ``owner`` set (not empty) in ``environ``."""
    return {row.name: read(row.name, environ) for row in rows(owner) if row.env and environ.get(row.env)}


def check_keyword(name: str, value: Any) -> None:
    """OptionError(name, value, rule) when ``value`` breaks keyword ``name``'s own rule."""
    check = SETTINGS[name].check
    rule = check(value) if check is not None else None
    if rule is not None:
        raise OptionError(name, value, rule)


def check_hook_keywords(values: Mapping[str, Any]) -> None:
    """NpuDumpHook's keywords as called (defaults included), each by its row's rule, then
    :data:`HOOK_RULES`: an OptionError naming the keyword, before anything is built."""
    for row in rows(HOOK):
        if row.name in values:
            check_keyword(row.name, values[row.name])
    check_combination(values)


# --------------------------------------------------------------------------- combination rules

#: How a rule names a keyword for the user: the keyword itself, its variable or its flag.
Spelled = Callable[[str], str]
#: What a rule shows as a keyword's value: the value, or the text the user typed.
Given = Callable[[str], Any]
Rule = Callable[[Mapping[str, Any], Spelled, Given], None]


def _golden_backend(values: Mapping[str, Any], spelled: Spelled, given: Given) -> None:
    """initial_state (the golden run) needs backend golden (its alias, a golden backend object), or
    auto/unset, which becomes it."""
    backend = values.get("backend")
    golden = canonical("backend", backend) in (None, "auto", GOLDEN_BACKEND) or getattr(backend, "golden_only", 0)
    if values.get("initial_state") is not None and not golden:
        # The message keeps its earlier wording ("backend is reference"): tests and scripts match it.
        name = getattr(backend, "name", backend)
        raise OptionError(spelled("initial_state"), given("initial_state"),
                          "is for the golden run, whose backend is reference, not {} ({}={})".format(
                              name, spelled("backend"), name))


def _emulated_only(values: Mapping[str, Any], spelled: Spelled, given: Given) -> None:
    """emulate_profile and faults shape the emulated NPU run: not the golden run, not the real NPU."""
    backend = values.get("backend")
    golden = values.get("initial_state") is not None or canonical("backend", backend) == GOLDEN_BACKEND
    for keyword in ("emulate_profile", "faults"):
        if values.get(keyword) and (golden or backend == "npu"):  # None, {}: not given
            raise OptionError(spelled(keyword), given(keyword), "applies to the emulated NPU run only, not to {}".format(
                "the golden run" if golden else "the real NPU"))


def _hook_alone(values: Mapping[str, Any], spelled: Spelled, given: Given) -> None:
    """NpuDumpSession: a hook made beforehand brings its own options."""
    if values.get("hook") is not None and (values.get("options") is not None or values.get("hook_options")):
        raise OptionError(spelled("hook"), type(values["hook"]).__name__,
                          "brings its own options: give hook= alone, or options and hook options without it")


#: Hook keywords that cannot go together (keyword -> value, only the keywords given).
HOOK_RULES = (_golden_backend, _emulated_only)  # type: Tuple[Rule, ...]
#: NpuDumpSession's: ``{"hook", "options", "hook_options"}``.
SESSION_RULES = (_hook_alone,)  # type: Tuple[Rule, ...]


def check_combination(values: Mapping[str, Any], spelled: Optional[Spelled] = None, given: Optional[Given] = None,
                      rules: Iterable[Rule] = HOOK_RULES) -> None:
    """OptionError for the first of ``rules`` that ``values`` (only the keywords given) break.

    ``spelled(keyword)`` is the name the error reports (default: the keyword), ``given(keyword)``
    the value it shows (default: the value in ``values``), e.g. the variable and its text.
    """
    name = spelled if spelled is not None else (lambda keyword: keyword)
    shown = given if given is not None else values.__getitem__
    for rule in rules:
        rule(values, name, shown)
