"""Import rules: `_tf.py` is the only package module that imports TensorFlow, and importing the
TF-free modules loads none of it (Ascend images: the package must load before TF is configured);
the import graph has no cycles; no module imports another package's private module; the bundle
format (`bundle/`) imports nothing hook-side."""
import ast
import inspect
import os
import subprocess
import sys

import npu_dump_hook

PACKAGE_DIR = os.path.dirname(os.path.abspath(npu_dump_hook.__file__))
TF_ROOTS = ("tensorflow", "tensorflow_core", "tensorflow_estimator", "keras", "npu_bridge")
# The sample models are user scripts shipped with the package: they import TF as users do.
USER_CODE = ("sample_models",)


def _package_modules():
    for folder, dirs, files in os.walk(PACKAGE_DIR):
        dirs[:] = sorted(d for d in dirs if d not in USER_CODE and d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(folder, name), PACKAGE_DIR)


def _imported_roots(path):
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), filename=path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0], node.lineno



def _run_python(code):
    """``code`` run by this interpreter in a fresh process; fails the test if it fails."""
    done = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done

def test_only_tf_module_imports_tensorflow():
    offenders = []
    modules = list(_package_modules())
    assert "_tf.py" in modules and len(modules) > 20
    for module in modules:
        if module == "_tf.py":
            continue
        for root, line in _imported_roots(os.path.join(PACKAGE_DIR, module)):
            if root in TF_ROOTS:
                offenders.append("{}:{} imports {}".format(module, line, root))
    assert offenders == []


def test_importing_the_package_and_tf_free_modules_loads_no_tensorflow():
    modules = ["npu_dump_hook", "npu_dump_hook.cli", "npu_dump_hook.formats", "npu_dump_hook.bundle",
               "npu_dump_hook.locate", "npu_dump_hook.reference", "npu_dump_hook.emulator",
               "npu_dump_hook.collect", "npu_dump_hook.run_record", "npu_dump_hook.backends",
               "npu_dump_hook.training_step",
               "npu_dump_hook.cli._bundle", "npu_dump_hook.cli._parse", "npu_dump_hook.cli._since",
               "npu_dump_hook.cli._run", "npu_dump_hook.runner", "npu_dump_hook._site",
               "npu_dump_hook.config", "npu_dump_hook.determinism", "npu_dump_hook._capture"]
    # npu_dump_hook.hook is not among them: NpuDumpHook subclasses SessionRunHook (Estimator
    # checks the type), so that module loads TensorFlow, on first use of the name only.
    code = ("import sys\n"
            "for name in {!r}: __import__(name)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in {!r})\n"
            "print(','.join(bad))\n").format(modules, TF_ROOTS)
    done = _run_python(code)
    assert done.stdout.decode().strip() == ""


def test_the_run_commands_own_process_imports_only_what_launching_needs():
    # `npu-dump-hook run` parses, checks the variables and waits for the child: the patches
    # (runner._inject, _sessions, _install...) and the bundle writer are the child's imports.
    # filelock locks index.json only where flock does not exist: a bundle never pays its import.
    code = ("import sys\n"
            "from npu_dump_hook import cli\n"
            "from npu_dump_hook.cli import _run\n"
            "cli.build_parser()\n"
            "launch = sorted(m for m in sys.modules if m.startswith(('npu_dump_hook.runner._inject',\n"
            "    'npu_dump_hook.runner._child', 'npu_dump_hook.runner._install', 'npu_dump_hook.determinism',\n"
            "    'npu_dump_hook.bundle')))\n"
            "import npu_dump_hook.bundle\n"
            "print(','.join(launch) + ';' + str('filelock' in sys.modules))\n"
            "from npu_dump_hook.runner import main, Injection, install, installed, site_dir, start, _AfterImport\n"
            "from npu_dump_hook.runner import _child, _inject, _install, _after_import, bootstrap_command\n"
            "assert (main, bootstrap_command) == (_child.main, _child.bootstrap_command)\n"
            "assert (Injection, install, installed, site_dir, start, _AfterImport) == (_inject.Injection,\n"
            "    _install.install, _install.installed, _install.site_dir, _install.start, _after_import.AfterImport)\n")
    done = _run_python(code)
    assert done.stdout.decode().strip() == ";False"


def test_the_golden_free_checks_import_no_comparison_modules_and_every_public_name_still_imports():
    # the hook's end runs only compare.golden_free_checks: compare()'s modules (metrics, HTML, replay,
    # the worker pool...) load on first use of one of their names, through the package as before
    code = ("import sys\n"
            "from npu_dump_hook.compare import golden_free_checks\n"
            "heavy = ('_analysis', '_html', '_pool', '_worker', '_match', 'replay', 'ranks', 'stats', 'metrics')\n"
            "print(','.join(m for m in heavy if 'npu_dump_hook.compare.' + m in sys.modules))\n"
            "import npu_dump_hook.compare as package\n"
            "from npu_dump_hook.compare import _pool, render_html, DEFAULT_THRESHOLDS\n"
            "from npu_dump_hook.compare import *\n"
            "from npu_dump_hook.compare._html import render_html as html\n"
            "assert render_html is html and _pool is sys.modules['npu_dump_hook.compare._pool']\n"
            "print(sorted(n for n in package.__all__ if n not in globals()))\n"
            "try:\n"
            "    package.no_such_name\n"
            "except AttributeError as exc:\n"
            "    print(exc)\n")
    done = _run_python(code)
    assert done.stdout.decode().splitlines() == [
        "", "[]", "module 'npu_dump_hook.compare' has no attribute 'no_such_name'"]


def _module_name(rel):
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["npu_dump_hook"] + parts)


def _package_of(module, rel):
    return module if rel.endswith("__init__.py") else module.rpartition(".")[0]


def _import_graph():
    """``{module: {modules it imports}}`` over the package, module- and function-level imports alike.

    Importing ``a.b.c`` also runs ``a.b``; an edge to a package the importer itself sits in is
    left out (a submodule importing its siblings while the package initialises is not a cycle).
    """
    rels = {_module_name(rel): rel for rel in _package_modules()}
    graph = {}
    for module, rel in rels.items():
        with open(os.path.join(PACKAGE_DIR, rel), encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        package = _package_of(module, rel)
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
                names = [origin + "." + alias.name for alias in node.names]
                targets.update(name for name in names if name in rels)
                targets.add(origin)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names if alias.name.startswith("npu_dump_hook"))
        own = {module.rsplit(".", i)[0] for i in range(module.count(".") + 1)}
        edges = set()
        for target in targets:
            while target and target not in own:
                if target in rels:
                    edges.add(target)
                target = target.rpartition(".")[0]
        graph[module] = edges - {module}
    return graph


def _cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_cycles():
    graph = _import_graph()
    assert "npu_dump_hook.bundle.write" in graph["npu_dump_hook.bundle"]  # the graph sees the layers
    assert "npu_dump_hook.run_record" in graph["npu_dump_hook.collect"]
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _imports_of(module, rel, modules):
    """``(imported package module, line)`` for every import of ``module`` (file ``rel``), module- and
    function-level alike; ``from X import name`` counts as importing ``X.name`` when that is a module."""
    with open(os.path.join(PACKAGE_DIR, rel), encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    package = _package_of(module, rel)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            if not origin.startswith("npu_dump_hook"):
                continue
            for alias in node.names:
                name = origin + "." + alias.name
                yield (name if name in modules else origin), node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("npu_dump_hook"):
                    yield alias.name, node.lineno


def _private_holder(target):
    """The package whose private part ``target`` reaches (``a.b`` for ``a.b._c`` or ``a.b._c.d``), or None."""
    parts = target.split(".")
    for depth in range(len(parts) - 1, 0, -1):
        if parts[depth].startswith("_") and not parts[depth].startswith("__"):
            return ".".join(parts[:depth])
    return None


def _private_import_offenders():
    rels = {_module_name(rel): rel for rel in _package_modules()}
    offenders = []
    for module, rel in sorted(rels.items()):
        for target, line in sorted(set(_imports_of(module, rel, rels)), key=lambda found: (found[1], found[0])):
            holder = _private_holder(target)
            if holder is None or holder == "npu_dump_hook" or module == holder or module.startswith(holder + "."):
                continue
            offenders.append("{}:{} imports {}".format(rel, line, target))
    return offenders


def test_no_module_imports_another_packages_private_module():
    """``npu_dump_hook.pkg._m`` (and anything below it) is imported only from inside ``pkg`` (the same
    folder or below); private modules directly under ``npu_dump_hook/`` (``_tf``, ``_atomic``,
    ``_version``, ``_forked``, ...) are shared utilities, importable from anywhere. Another package
    uses what ``pkg`` exports (e.g. ``bundle.open_bundle``, ``bundle.place_file``)."""
    assert _private_holder("npu_dump_hook.bundle._fs") == "npu_dump_hook.bundle"
    assert _private_holder("npu_dump_hook._tf") == "npu_dump_hook"
    assert _private_holder("npu_dump_hook.bundle.view") is None
    assert _private_import_offenders() == []


#: What ``bundle/`` may import besides ``bundle/`` and ``formats/`` (the file formats it stores):
#: the shared top-level modules that know nothing of a run -- ``errors`` (the package's exception
#: types, raised by every layer), ``constants`` (names and values the formats fix; imports
#: nothing but the settings table its keyword value lists come from: ``settings``, which imports
#: only ``errors`` and ``_cli_conventions``), ``_atomic`` (atomic file writes), ``_version`` (the
#: version bundle.json records), ``_forked`` (forked workers for large files), ``_files`` (the
#: non-blocking open of a regular file, shared with formats and compare) and ``_signals`` (SIGTERM
#: as an exception while an archive is extracted, shared with compare), ``_written`` (stdlib only: the
#: sha256 of small files this process just wrote, noted by the formats' writers) with ``_bounded`` (its store). Hook-side modules (hook, run_record,
#: fingerprints, options, config, _capture, _tf, ...) build what a bundle holds; their schema
#: parts live in ``bundle/schema.py`` and they import it, never the other way round.
BUNDLE_MAY_IMPORT = ("npu_dump_hook.errors", "npu_dump_hook.constants", "npu_dump_hook.settings",
                     "npu_dump_hook._cli_conventions", "npu_dump_hook._atomic", "npu_dump_hook._version",
                     "npu_dump_hook._forked", "npu_dump_hook._files", "npu_dump_hook._signals",
                     "npu_dump_hook._written", "npu_dump_hook._bounded")


def test_bundle_imports_only_bundle_formats_and_shared_modules():
    """Everything ``bundle/`` reaches, directly or through what it imports, is in ``bundle/``,
    ``formats/`` or :data:`BUNDLE_MAY_IMPORT` (so the bundle format loads, and stays, without the hook)."""
    graph = _import_graph()
    seen, stack = set(), [m for m in graph if m == "npu_dump_hook.bundle" or m.startswith("npu_dump_hook.bundle.")]
    assert "npu_dump_hook.bundle.verify" in stack
    while stack:
        module = stack.pop()
        if module not in seen:
            seen.add(module)
            stack.extend(graph.get(module, ()))
    inside = ("npu_dump_hook.bundle", "npu_dump_hook.formats")
    outside = sorted(m for m in seen if m not in BUNDLE_MAY_IMPORT
                     and not any(m == p or m.startswith(p + ".") for p in inside))
    assert outside == []


#: The modules outside ``train/`` that may import it: the hook that drives it, the runner's
#: training-graph and inference-run checks, and the old import paths of the modules that moved into it.
TRAIN_IMPORTERS = ("npu_dump_hook.hook", "npu_dump_hook.runner._inject", "npu_dump_hook.runner._infer",
                   "npu_dump_hook.runner._sessions",
                   "npu_dump_hook.fingerprints",
                   "npu_dump_hook.training_step", "npu_dump_hook.reference", "npu_dump_hook._capture")
MOVED_INTO_TRAIN = {"npu_dump_hook.fingerprints": "npu_dump_hook.train.fingerprints",
                    "npu_dump_hook.training_step": "npu_dump_hook.train.training_step",
                    "npu_dump_hook.reference": "npu_dump_hook.train.golden_capture",
                    "npu_dump_hook._capture": "npu_dump_hook.train.capture"}


def _in_train(module):
    return module == "npu_dump_hook.train" or module.startswith("npu_dump_hook.train.")


def test_train_is_imported_only_from_above():
    """``train/`` imports the layers below it; of those, none imports ``train/`` back."""
    graph = _import_graph()
    importers = sorted(m for m, edges in graph.items() if not _in_train(m) and any(map(_in_train, edges)))
    assert importers == sorted(TRAIN_IMPORTERS)
    below = {e for m, edges in graph.items() if _in_train(m) for e in edges if not _in_train(e)}
    assert "npu_dump_hook.bundle" in below and not below & set(TRAIN_IMPORTERS)


def test_the_moved_modules_keep_their_old_import_paths_as_the_same_objects():
    code = ("import importlib, sys\n"
            "pairs = {!r}\n"
            "for old, new in sorted(pairs.items()):\n"
            "    assert importlib.import_module(old) is importlib.import_module(new) is sys.modules[old], old\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in {!r})\n"
            "print(','.join(bad))\n").format(MOVED_INTO_TRAIN, TF_ROOTS)
    done = _run_python(code)
    assert done.stdout.decode().strip() == ""  # and importing them loads no TensorFlow


# -- sizes (issue 19): the hook decides *when*; what it drives lives in train/ -----------------------

#: hook.py's ceiling, ``NpuDumpHook.__init__``'s (signature included), every module's.
HOOK_MAX_LINES, HOOK_INIT_MAX_LINES, MODULE_MAX_LINES = 400, 40, 600


def _line_count(relative):
    with open(os.path.join(PACKAGE_DIR, relative), encoding="utf-8") as handle:
        return sum(1 for _ in handle)


def test_the_hook_stays_small_and_no_module_exceeds_600_lines():
    assert _line_count("hook.py") <= HOOK_MAX_LINES
    from npu_dump_hook.hook import NpuDumpHook  # (Python 3.7's ast has no end lines: inspect finds the block)

    assert len(inspect.getsourcelines(NpuDumpHook.__init__)[0]) <= HOOK_INIT_MAX_LINES
    too_long = {path: lines for path in _package_modules() for lines in [_line_count(path)] if lines > MODULE_MAX_LINES}
    assert too_long == {}
