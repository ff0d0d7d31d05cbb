"""What a run ran on: the ``run.environment`` section of bundle.json (docs/bundle-format.md §2.5).

Two runs that should compute alike often differ in what they ran on: a CANN or driver
upgrade, another ``precision_mode``, a fusion switch file, another TensorFlow. ``compare``
prints the differences of its two sides before any metric (:func:`differences`), so the
first thing a user reads is what changed. :func:`capture` records, without a subprocess and
without importing anything not yet loaded (TensorFlow's version comes from the caller)::

    versions   python, npu_dump_hook, tensorflow, numpy, protobuf (as loaded), npu_bridge
               (installed distribution), cann (toolkit version.cfg/version.info), driver
    packages   {"count", "sha256"}: the installed distributions "name==version", sorted, hashed
               (what ``pip freeze`` lists, read from importlib.metadata; on Python 3.7 from
               sys.path's metadata folders as pkg_resources reads them, else from pkg_resources)
    env        ASCEND_*, HCCL_*, TF_*, DUMP_GE_GRAPH*, NPU_DUMP_* variables (values as set; a name
               with TOKEN, SECRET, PASSWORD, CREDENTIAL, AUTH, _KEY or PRIVATE shows <redacted>;
               Terraform's TF_VAR_*, TF_TOKEN_*, TF_CLI_* are left out: bundles are shared)
    session    precision_mode, fusion_switch_file, fusion_switch_sha256, deterministic: the
               NpuOptimizer options of the session's ConfigProto (the emulator's precision
               mode when the run was emulated), None where unknown
"""
import email
import hashlib
import os
import platform
import re
import sys
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ._files import open_regular
from ._version import __version__
from .bundle.schema import ENVIRONMENT_PREFIXES
from .settings import ENV_RUN_FLAGS, variable

__all__ = ["capture", "capture_post_hoc", "RECORDED_BY_COLLECT", "session_options", "differences", "ENVIRONMENT_PREFIXES", "REDACTED"]

_ASCEND_ROOT = "/usr/local/Ascend"
_CANN_VERSION_FILES = ("ascend-toolkit/latest/version.cfg", "ascend-toolkit/latest/compiler/version.info",
                       "latest/version.cfg", "nnae/latest/version.cfg")
_DRIVER_VERSION_FILE = "driver/version.info"
_MAX_VERSION_FILE = 64 * 1024
#: TF_ is also Terraform's prefix (variables, tokens, CLI config): never recorded.
_NOT_RECORDED = ("TF_VAR_", "TF_TOKEN_", "TF_CLI_")
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "_KEY", "PRIVATE")
REDACTED = "<redacted>"
#: The package's own variables that say which role a run plays and where it writes: they differ
#: between an NPU run and its golden run by design, so :func:`differences` leaves them out (they
#: stay recorded; faults and the emulation profile change the numbers and are shown).
#: So is ENV_RUN_FLAGS (which of them ``npu-dump-hook run`` set from its flags: bookkeeping for its
#: error messages, which the two runs' different flags make differ).
ROLE_VARIABLES = tuple(variable(name) for name in ("backend", "initial_state", "output_dir", "bundle_dir")) + (
    ENV_RUN_FLAGS,)
#: ``environment.recorded_by`` of a post-hoc ``collect`` bundle: what the collecting process saw.
RECORDED_BY_COLLECT = "collect"
_TF_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-aarch64")


def _read_version(path: str) -> Optional[str]:
    """``Version=X`` (or ``version=X``) of a small regular file; None when absent or unreadable."""
    try:
        with open_regular(path) as handle:
            text = handle.read(_MAX_VERSION_FILE).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() in ("version", "runtime_running_version", "toolkit_running_version"):
            return value.strip().strip("[]").split(":")[-1] or None
    return None


def _cann_version(environ: Mapping[str, str]) -> Optional[str]:
    roots = [environ.get(n) for n in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_OPP_PATH")]
    for root in [r for r in roots if r]:
        for name in ("version.cfg", "version.info", "compiler/version.info", "../version.cfg"):
            found = _read_version(os.path.join(root, name))
            if found:
                return found
    for name in _CANN_VERSION_FILES:
        found = _read_version(os.path.join(_ASCEND_ROOT, name))
        if found:
            return found
    return None


def _shown_value(name: str, value: str) -> str:
    """A variable's value, or ``<redacted>`` when its name says it holds a secret: bundles are shared."""
    upper = name.upper()
    return REDACTED if any(word in upper for word in _SECRET_WORDS) else value


def _distributions() -> List[str]:
    """"name==version" of every installed distribution (lowercase names, sorted)."""
    try:
        from importlib import metadata  # novermin (Python >= 3.8; 3.7 takes the except branch)
        found = {_name_version(d) for d in metadata.distributions()}
    except ImportError:  # Python 3.7
        listed = None if "pkg_resources" in sys.modules else _metadata_folders_listing()
        if listed is not None:
            return listed
        try:
            import pkg_resources
        except ImportError:
            return []
        found = {"{}=={}".format(d.project_name.lower(), d.version) for d in pkg_resources.working_set}
    return sorted(found)


# Python 3.7: importing pkg_resources costs ~0.1 s of CPU (it builds its working set and more).
# What its working set lists of a plain installation (sys.path folders of *.dist-info and
# *.egg-info entries) is read here by the same rules (setuptools' ``find_on_path``,
# ``Distribution.from_location``): the entry's "name-version" file name gives the name (runs of
# characters other than letters, digits and "." made "-"), the version is the file name's, or an
# egg-info's own "Version:" line, or a dist-info's when its name has none; the first folder of
# sys.path to hold a name wins; an empty metadata folder, and a dist-info that is not a folder,
# are no distribution. Anything else (an egg, a zip, a name twice in one folder, a version
# pkg_resources would rewrite, an unreadable file, ``__main__.__requires__``): None, and
# pkg_resources is asked.
_META_SUFFIXES = (".dist-info", ".egg-info")
_NUMBER = "(?:0|[1-9][0-9]*)"
_LOCAL_PART = "(?:[0-9]*[a-z][a-z0-9]*|" + _NUMBER + ")"
#: A version that packaging's normalization (setuptools' safe_version) leaves as it is.
_NORMAL_VERSION = re.compile(r"{n}(?:\.{n})*(?:(?:a|b|rc){n})?(?:\.post{n})?(?:\.dev{n})?"
                             r"(?:\+{l}(?:\.{l})*)?\Z".format(n=_NUMBER, l=_LOCAL_PART))
_NOT_NAME_CHARS = re.compile("[^A-Za-z0-9.]+")


def _metadata_folders_listing() -> Optional[List[str]]:
    """``"name==version"`` of pkg_resources' working set read from sys.path (see above), sorted;
    None when it cannot be read so."""
    main = sys.modules.get("__main__")
    if getattr(main, "__requires__", None) is not None:
        return None
    found = {}  # type: Dict[str, str]
    for entry in sys.path:
        if not isinstance(entry, str) or entry.lower().endswith(".egg"):
            return None
        folder = os.path.normcase(os.path.realpath(entry))
        if os.path.isfile(folder):  # a zip on sys.path
            return None
        listed = _folder_distributions(folder)
        if listed is None:
            return None
        for key, version in listed.items():
            found.setdefault(key, version)
    return sorted("{}=={}".format(key, version) for key, version in found.items())


def _folder_distributions(folder: str) -> Optional[Dict[str, str]]:
    """{lowercase name: version} of the metadata entries of one sys.path folder, or None."""
    try:
        names = os.listdir(folder)
    except OSError:
        return {}
    found = {}  # type: Dict[str, str]
    for name in names:
        suffix = next((s for s in _META_SUFFIXES if name.lower().endswith(s)), None)
        if suffix is None:
            continue
        path = os.path.join(folder, name)
        is_folder = os.path.isdir(path)
        if (suffix == ".dist-info" and not is_folder) or (is_folder and not os.listdir(path)):
            continue
        named = _named_version(path, name[:-len(suffix)], suffix, is_folder)
        if named is None or named[0] in found:
            return None
        found[named[0]] = named[1]
    return found


def _named_version(path: str, stem: str, suffix: str, is_folder: bool) -> Optional[Tuple[str, str]]:
    """(lowercase name, version) of one metadata entry, or None when pkg_resources would read more."""
    name, _, rest = stem.partition("-")
    version = rest.partition("-")[0] or None
    if suffix == ".egg-info" or version is None:
        own = _metadata_version(path, suffix, is_folder)
        version = own or version
    if not name or version is None or not _NORMAL_VERSION.match(version):
        return None
    return _NOT_NAME_CHARS.sub("-", name).lower(), version


def _metadata_version(path: str, suffix: str, is_folder: bool) -> Optional[str]:
    """The value of the first "Version:" line of the entry's metadata file ("" when none); None
    when it cannot be read (pkg_resources decides then)."""
    if is_folder:
        path = os.path.join(path, "METADATA" if suffix == ".dist-info" else "PKG-INFO")
    try:
        with open(path, "rb") as handle:
            lines = handle.read().decode("utf-8").splitlines()
    except FileNotFoundError:
        return ""
    except (OSError, ValueError):
        return None
    for line in lines:
        line = line.strip()  # (as pkg_resources reads metadata lines)
        if line.lower().startswith("version:"):
            return line.partition(":")[2].strip()
    return ""


def _name_version(distribution: Any) -> str:
    """``"name==version"`` as ``Distribution.metadata["Name"]`` and ``.version`` give them, from the
    metadata's header only: those parse the whole file (its long description too) with the email
    parser, once per property, ~1.5 ms a distribution. The header ends at the first empty line,
    where the parser stops looking for fields, so parsing the header alone finds the same values."""
    text = _metadata_text(distribution)
    end = text.find("\n\n")
    if "\r" not in text[:end] and end > 0:  # else (CR line ends, no body, empty header): the whole text
        text = text[:end + 1]
    fields = email.message_from_string(text)
    name, version = fields["Name"], fields["Version"]
    if not name or not version or "\n" in name + version:  # missing or folded: importlib's own reading
        name, version = distribution.metadata["Name"], distribution.version
    return "{}=={}".format((name or "").lower(), version)


def _metadata_text(distribution: Any) -> str:
    """The metadata file's text, looked up as importlib.metadata looks it up."""
    return (distribution.read_text("METADATA") or distribution.read_text("PKG-INFO")
            or distribution.read_text("") or "")


def _installed_version(lines: List[str], *names: str) -> Optional[str]:
    wanted = {n.lower() for n in names}
    for line in lines:
        name, _, version = line.partition("==")
        if name.replace("_", "-") in wanted:
            return version
    return None


def _loaded_version(module: str) -> Optional[str]:
    loaded = sys.modules.get(module)
    return getattr(loaded, "__version__", None) if loaded is not None else None


def _parameter(parameters: Any, key: str) -> Any:
    try:
        if key not in parameters:
            return None
        value = parameters[key]
    except (TypeError, KeyError):
        return None
    if value.WhichOneof("value") == "i":
        return int(value.i)
    if value.WhichOneof("value") == "b":
        return bool(value.b)
    return value.s.decode("utf-8", "replace") if isinstance(value.s, bytes) else value.s


def _file_sha256(path: Optional[str]) -> Optional[str]:
    if not path:
        return None
    digest = hashlib.sha256()
    try:
        with open_regular(path) as handle:
            for block in iter(lambda: handle.read(1 << 16), b""):
                digest.update(block)
    except (OSError, ValueError):
        return None
    return digest.hexdigest()


def session_options(config: Any = None, emulator: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """``precision_mode``, ``fusion_switch_file`` (+ its sha256) and ``deterministic`` of the
    NpuOptimizer in ``config`` (a ConfigProto or None); an emulated run's precision mode
    (``emulator["numerics"]["precision_mode"]``) is what it computed with."""
    parameters = None
    rewrite = getattr(getattr(config, "graph_options", None), "rewrite_options", None)
    for optimizer in getattr(rewrite, "custom_optimizers", None) or ():
        if getattr(optimizer, "name", None) == "NpuOptimizer":
            parameters = optimizer.parameter_map
    found = {key: _parameter(parameters, key) if parameters is not None else None
             for key in ("precision_mode", "fusion_switch_file", "deterministic")}
    numerics = (emulator or {}).get("numerics") if isinstance(emulator, Mapping) else None
    if isinstance(numerics, Mapping) and numerics.get("precision_mode"):
        found["precision_mode"] = numerics["precision_mode"]
    found["fusion_switch_sha256"] = _file_sha256(found["fusion_switch_file"])
    return found


def capture(tf_version: Optional[str] = None, config: Any = None, emulator: Optional[Mapping[str, Any]] = None,
            environ: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """The ``environment`` section of this process (module doc)."""
    env = os.environ if environ is None else environ
    installed = _distributions()
    versions = {
        "python": platform.python_version(), "npu_dump_hook": __version__, "tensorflow": tf_version,
        "numpy": _loaded_version("numpy"), "protobuf": _installed_version(installed, "protobuf"),
        "npu_bridge": _installed_version(installed, "npu-bridge", "npu-device"),
        "cann": _cann_version(env), "driver": _read_version(os.path.join(_ASCEND_ROOT, _DRIVER_VERSION_FILE)),
    }
    packages = None
    if installed:
        packages = {"count": len(installed),
                    "sha256": hashlib.sha256("\n".join(installed).encode("utf-8")).hexdigest()}
    variables = {name: _shown_value(name, env[name]) for name in sorted(env)
                 if name.startswith(ENVIRONMENT_PREFIXES) and not name.startswith(_NOT_RECORDED)}
    return {"versions": versions, "packages": packages, "env": variables,
            "session": session_options(config, emulator)}


def capture_post_hoc(environ: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """The ``environment`` section a post-hoc ``collect`` records: this (collecting) process's
    versions, distributions and variables, TensorFlow's version as installed (``collect`` never
    imports it), no session options (the run's ConfigProto is not known), and
    ``recorded_by: "collect"`` so a reader knows it describes the collecting machine, which is
    the run's when ``collect`` runs where the job ran (docs/bundle-format.md section 2.5)."""
    installed = _distributions()
    found = capture(_installed_version(installed, *_TF_DISTRIBUTIONS), None, None, environ)
    found["recorded_by"] = RECORDED_BY_COLLECT
    return found


def differences(left: Any, right: Any, names: Tuple[str, str] = ("NPU", "golden")) -> List[str]:
    """One line per value that differs between two ``environment`` sections (or run sections /
    bundle.json documents holding one): ``session.precision_mode: NPU allow_fp32_to_fp16,
    golden fp32``; empty when either side records none. :data:`ROLE_VARIABLES` are not compared."""
    a, b = _section(left), _section(right)
    if a is None or b is None:
        return []
    lines = []
    for part in ("versions", "session", "env"):
        x, y = a.get(part) or {}, b.get(part) or {}
        for key in sorted(set(x) | set(y)):
            if part == "env" and key in ROLE_VARIABLES:
                continue
            if x.get(key) != y.get(key):
                lines.append("{}.{}: {} {}, {} {}".format(part, key, names[0], _show(x.get(key)), names[1],
                                                          _show(y.get(key))))
    if (a.get("packages") or {}).get("sha256") != (b.get("packages") or {}).get("sha256"):
        lines.append("packages: {} {}, {} {} (the installed distributions differ)".format(
            names[0], _show_packages(a.get("packages")), names[1], _show_packages(b.get("packages"))))
    return lines


def _section(doc: Any) -> Optional[Mapping[str, Any]]:
    if not isinstance(doc, Mapping):
        return None
    if "session" in doc and "versions" in doc and "env" in doc:
        return doc
    run = doc.get("run") if isinstance(doc.get("run"), Mapping) else doc
    found = run.get("environment")
    return found if isinstance(found, Mapping) else None


def _show(value: Any) -> str:
    return "(none)" if value is None else str(value)


def _show_packages(packages: Any) -> str:
    if not isinstance(packages, Mapping):
        return "(none)"
    return "{} distributions, sha256 {}".format(packages.get("count"), str(packages.get("sha256"))[:12])
