"""The exit codes of every ``npu-dump-hook`` command (docs/design.md §4), and the error that carries one.

The codes are defined once, in :mod:`npu_dump_hook._cli_conventions` (the runner exits with
the same ones), and re-exported here. Handlers return one of these codes, or raise
:class:`CliError` with one of them; nothing else in :mod:`npu_dump_hook.cli` picks an exit code.
"""
from .._cli_conventions import EXIT_CHECK_FAILED, EXIT_ERROR, EXIT_OK, EXIT_USAGE

__all__ = ["EXIT_OK", "EXIT_CHECK_FAILED", "EXIT_USAGE", "EXIT_ERROR", "CliError", "pending"]


class CliError(Exception):
    """An error the command reports as one line ``npu-dump-hook: <message>`` and exits ``code``.

    ``message`` names what the user typed (the option and its value, or the path).
    """

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def __str__(self) -> str:
        return self.message


def pending(args: object, code: int) -> None:
    """Record the code the command will exit with once its output is written.

    When the reader of stdout goes away early (``... | head``), the command stops and
    exits with the last code recorded here (0 if none), not with a BrokenPipeError.
    """
    setattr(args, "pending_exit", code)
