"""Every document the package and its documentation cite is in the repository.

Where citations are looked for: the text of every package module (``npu_dump_hook/**/*.py``:
its docstrings and comments), ``README.rst`` and every Markdown file under ``docs/``.

What a citation is: a token ending in ``.md`` (letters, digits and ``_ . / -``), such as
``docs/reference/ascend-dump-formats.md §6``, unless it is part of an address (``https://...``).
A Markdown link's target, ``[text](target.md)``, is a citation too.

Where it must resolve, one rule per kind:

- a token: a path from the repository root, so it is written as ``docs/<file>.md`` or
  ``docs/reference/<file>.md``, never as a bare file name;
- a Markdown link target: relative to the folder of the file holding the link, as a Markdown
  viewer reads it;
- inside ``docs/reference/`` (the project's shared reference notes, copied unchanged) only the
  Markdown links are citations of this repository: the notes' other ``.md`` tokens name their
  sources, files of other repositories (``docs/en/tfadapter_1/...md`` of the TF adapter...).
"""
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = os.path.join("docs", "reference")
TOKEN = re.compile(r"[\w./-]*\.md(?![\w/-]|\.\w)")
LINK = re.compile(r"\]\(([^)\s#]+\.md)(?:#[^)\s]*)?\)")
ADDRESS = re.compile(r"[a-z][a-z0-9+.-]*://\S*", re.I)
def _citing_files():
    """Repository-relative paths of the files whose citations are checked."""
    found = ["README.rst"]
    for top, suffix in (("npu_dump_hook", ".py"), ("docs", ".md")):
        for folder, dirs, files in os.walk(os.path.join(REPO, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            found += [os.path.relpath(os.path.join(folder, name), REPO) for name in sorted(files)
                      if name.endswith(suffix)]
    return found


def _line_citations(line):
    """(cited path, True for a Markdown link target) for each citation in one line of text."""
    line = ADDRESS.sub(" ", line)
    return ([(target, True) for target in LINK.findall(line)]
            + [(token, False) for token in TOKEN.findall(LINK.sub("]", line))])


def _citations(path):
    """(line number, cited path, folder it resolves from) for each citation in ``path``."""
    links_only = os.path.dirname(path) == REFERENCE
    with open(os.path.join(REPO, path), encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            for cited, is_link in _line_citations(line):
                if is_link or not links_only:
                    yield number, cited, os.path.dirname(path) if is_link else ""


def _missing(path):
    """(line number, cited path) of each citation in ``path`` that names no file of the repository."""
    return [(number, cited) for number, cited, folder in _citations(path)
            if not os.path.isfile(os.path.normpath(os.path.join(REPO, folder, cited)))]


@pytest.mark.parametrize("path", _citing_files())
def test_every_cited_document_is_in_the_repository(path):
    assert _missing(path) == []


def test_the_reference_notes_are_in_the_repository():
    names = sorted(os.listdir(os.path.join(REPO, REFERENCE)))
    assert {"ascend-dump-formats.md", "npu-bridge-dump-api.md", "msaccucmp-notes.md"} <= set(names), names


@pytest.mark.parametrize("line, found", [
    ("see reference/ascend-dump-formats.md §6", ["reference/ascend-dump-formats.md"]),
    ("(docs/bundle-format.md rule 7)", ["docs/bundle-format.md"]),
    ("[`docs/x.md`](x.md) and [y](../y.md#part)", ["x.md", "../y.md", "docs/x.md"]),
    ("https://github.com/a/b/blob/main/README.md, not a citation", []),
    ("a .mdx file, README.markdown, readme.md.txt; see docs/a.md.", ["docs/a.md"]),
])
def test_what_counts_as_a_citation(line, found):
    assert [cited for cited, _ in _line_citations(line)] == found
