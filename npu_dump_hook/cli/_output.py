"""What the commands print is inert: names and paths come from bundles, dump trees and graphs
made by someone else, and may carry terminal escape sequences (``ESC[2J``, ``ESC]0;title BEL``),
C1 controls or lone surrogates (undecodable file name bytes).

* :func:`say`: ``print`` for the commands' text output (stdout, or ``file``): every line of the
  text with its control characters and lone surrogates as visible escapes
  (:func:`npu_dump_hook._inert.printable`); the line breaks the command itself puts between
  lines stay line breaks.
* :func:`inert_lines`: that text, for writers that do not print (the log handler, the
  one-line errors of :mod:`npu_dump_hook.cli`).

JSON output needs neither: ``json.dump`` with its default ``ensure_ascii`` escapes every control
character and surrogate itself.
"""
import sys
from typing import IO, Optional

from .._inert import printable

__all__ = ["say", "inert_lines"]


def inert_lines(text: str) -> str:
    """``text`` with each line made printable (escapes), the ``\\n`` between lines kept."""
    return "\n".join(printable(line) for line in text.split("\n"))


def say(text: str = "", file: Optional[IO[str]] = None) -> None:
    """Print ``text`` (one or more lines) inert, to ``file`` (default: the current stdout)."""
    print(inert_lines(text), file=file if file is not None else sys.stdout)
