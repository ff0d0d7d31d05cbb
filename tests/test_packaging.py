"""Packaging: the sample models ship inside the package however it is installed or imported.

``npu_dump_hook/sample_models`` is a relative symlink to the top-level ``sample_models/``: one
copy of the files, found by a normal import from a wheel, an editable install (pip 22's
``setup.py develop`` on Python 3.7, PEP 660 with current pip) or a checkout on ``sys.path``.
"""
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

import npu_dump_hook

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = ("setup.cfg", "setup.py", "README.rst", "npu_dump_hook", "sample_models")
PROBE = ("import npu_dump_hook, npu_dump_hook.sample_models.mlp_session as m\n"
         "print(npu_dump_hook.__file__); print(m.__file__)\n")


def _run(args, cwd, env=None):
    done = subprocess.run(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    return done.stdout.decode()


def _copy_sources(target):
    os.makedirs(target)
    for name in SOURCES:
        source = os.path.join(REPO, name)
        if os.path.isdir(source):
            shutil.copytree(source, os.path.join(target, name), symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, target)


def test_the_package_link_is_a_relative_symlink_to_the_top_level_folder():
    link = os.path.join(REPO, "npu_dump_hook", "sample_models")
    assert os.path.islink(link) and os.readlink(link) == os.path.join("..", "sample_models")


def test_a_built_wheel_ships_the_sample_models_and_imports_from_its_own_copy(tmp_path):
    source = str(tmp_path / "src")
    _copy_sources(source)  # the build writes build/ and *.egg-info: not into the checkout
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
          "--disable-pip-version-check", "-w", str(tmp_path / "wheel"), source], cwd=str(tmp_path))
    (wheel,) = os.listdir(str(tmp_path / "wheel"))
    with zipfile.ZipFile(str(tmp_path / "wheel" / wheel)) as archive:
        names = set(archive.namelist())
        archive.extractall(str(tmp_path / "site"))
        metadata = [n for n in names if n.endswith(".dist-info/METADATA")][0]
        requires = [line.split(":", 1)[1].strip() for line in archive.read(metadata).decode().splitlines()
                    if line.startswith("Requires-Dist:")]
    # TensorFlow only through the extra (Ascend images bring Huawei's build); protobuf capped on 3.7.
    tf_requires = [r.replace("'", '"') for r in requires if r.startswith("tensorflow")]
    assert tf_requires and all('extra == "tf"' in r for r in tf_requires), tf_requires
    assert any(r.startswith("protobuf") and "<4" in r and "3.8" in r for r in requires), requires
    for module in ("__init__", "_data", "_session", "cnn_estimator", "mlp_session", "text_model"):
        assert "npu_dump_hook/sample_models/{}.py".format(module) in names
    # every subpackage (the console script needs cli/, the runner's environment-only start _site/)
    for folder, _dirs, files in os.walk(os.path.join(REPO, "npu_dump_hook")):
        relative = os.path.relpath(folder, REPO).replace(os.sep, "/")
        if "__init__.py" in files and "__pycache__" not in relative:
            assert relative + "/__init__.py" in names, relative
    assert not any(name.startswith("sample_models/") for name in names)  # no top-level package
    # The unpacked wheel first on sys.path, as site-packages would hold it, run from elsewhere.
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    package, sample = _run([sys.executable, "-c", PROBE], cwd=str(tmp_path), env=env).split()
    site = str(tmp_path / "site")
    assert package.startswith(site) and sample.startswith(site) and not os.path.islink(os.path.dirname(sample))


def test_a_plain_checkout_on_sys_path_imports_the_sample_models():
    package, sample = _run([sys.executable, "-c", PROBE], cwd=REPO).split()
    assert package == os.path.join(REPO, "npu_dump_hook", "__init__.py")
    assert sample == os.path.join(REPO, "npu_dump_hook", "sample_models", "mlp_session.py")


def test_this_interpreter_imports_the_package_with_its_sample_models():
    # However the test venv installed it (editable: pip 22 develop on 3.7, PEP 660 on 3.11).
    from npu_dump_hook.sample_models import cnn_estimator, mlp_session, text_model

    assert all(callable(m.train) for m in (cnn_estimator, mlp_session, text_model))
    assert os.path.dirname(npu_dump_hook.__file__) == os.path.dirname(os.path.dirname(mlp_session.__file__))


REPORT_FILES = ("page.html", "report.css", "report.js")   # the --html report's package data
REPORT_PROBE = ("import sys, npu_dump_hook.compare._html as h\n"
                "sys.stdout.write(h.__file__ + '\\n' + h.render_html({'schema': h.SCHEMA, 'rows': []}))\n")


def test_sdist_and_the_wheel_built_from_it_ship_the_html_report_files(tmp_path):
    source = str(tmp_path / "src")
    _copy_sources(source)
    _run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "sdist")], cwd=source)
    (sdist,) = os.listdir(str(tmp_path / "sdist"))
    with tarfile.open(str(tmp_path / "sdist" / sdist)) as archive:
        members = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for name in REPORT_FILES:
        assert "npu_dump_hook/compare/report/" + name in members, sorted(members)
    # A wheel built from the sdist, as pip does when it installs one: it carries them too.
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
          "--disable-pip-version-check", "-w", str(tmp_path / "wheel"), str(tmp_path / "sdist" / sdist)],
         cwd=str(tmp_path))
    (wheel,) = os.listdir(str(tmp_path / "wheel"))
    with zipfile.ZipFile(str(tmp_path / "wheel" / wheel)) as archive:
        for name in REPORT_FILES:
            assert "npu_dump_hook/compare/report/" + name in archive.namelist()
        archive.extractall(str(tmp_path / "site"))
    # The installed copy renders the same page as this checkout, from its own data files.
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    module, page = _run([sys.executable, "-c", REPORT_PROBE], cwd=str(tmp_path), env=env).split("\n", 1)
    assert module.startswith(str(tmp_path / "site"))
    from npu_dump_hook.compare._html import SCHEMA, render_html
    assert page == render_html({"schema": SCHEMA, "rows": []})
