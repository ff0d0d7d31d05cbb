"""What every ``npu-dump-hook`` process shares with the user, in one place (docs/design.md §4).

The command line (:mod:`npu_dump_hook.cli`) and the runner it starts in the script's process
(:mod:`npu_dump_hook.runner`) speak with one voice: the program name, the exit codes, the way a
log record or an error becomes one line on stderr, and which level ``-v/-q/--debug`` select.
Both import this module; it imports nothing of the package (the runner must not import
``cli/``, which imports the runner).

Exit codes::

    0  EXIT_OK            everything went as asked
    1  EXIT_CHECK_FAILED  a check failed (verify, compare, parse, inspect)
    1  EXIT_SCRIPT_ERROR  the script the runner ran died of an uncaught exception (the hook's
                          own NpuDumpError: one line, its traceback with -v), or the runner's
                          own work failed after the script ran (Python's status)
    2  EXIT_USAGE         bad arguments, option values or variables; a path that does not exist
    3  EXIT_ERROR         anything else
    4  EXIT_NO_BUNDLE     ``run``: the script ended (status 0) without a bundle while dumping was
                          asked (no training step was seen, e.g. eager Keras); --allow-no-bundle
                          keeps the script's 0
"""
import logging
import sys

__all__ = ["PROG", "EXIT_OK", "EXIT_CHECK_FAILED", "EXIT_USAGE", "EXIT_ERROR", "EXIT_SCRIPT_ERROR",
           "EXIT_NO_BUNDLE", "LOG_LEVELS", "NOTICE", "LogFormatter", "one_line", "error_line", "print_error",
           "level_name"]

#: The program name every message starts with.
PROG = "npu-dump-hook"

#: Everything went as asked.
EXIT_OK = 0
#: A check failed: verify found problems, compare breached a threshold, parse met a bad or
#: unrecognised file, inspect/verify were given something that is not a bundle.
EXIT_CHECK_FAILED = 1
#: Usage: bad arguments or option values, a path given on the command line that does not exist.
EXIT_USAGE = 2
#: Anything else (one line on stderr; the traceback only with --debug).
EXIT_ERROR = 3
#: What Python exits with after an uncaught exception: the runner's status for a script that
#: died of one (an NpuDumpError the injected hook raised is one line, its traceback with -v or
#: --debug), and for its own failures once the script has run.
EXIT_SCRIPT_ERROR = 1
#: ``run``: the script ended with status 0, but no bundle was written while dumping was asked
#: (a CI job gating on the run must not pass); ``--allow-no-bundle`` keeps the script's status.
EXIT_NO_BUNDLE = 4

#: The level names ``NPU_DUMP_HOOK_LOG_LEVEL`` accepts, most verbose first.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

#: A log record with this attribute true is a notice (``extra={NOTICE: True}``): a line the user
#: must see that is no warning (the hook's summary); it is printed without a level name.
NOTICE = "npu_dump_hook_notice"

#: Library messages meant for plain scripts start with this; under the program's name it is dropped.
_SCRIPT_PREFIX = "npu_dump_hook: "


def one_line(text: str) -> str:
    """``text`` with its line breaks turned into blanks (every message is one line)."""
    return " ".join(str(text).splitlines())


def error_line(message: object) -> str:
    """``npu-dump-hook: <message>``, on one line."""
    return "{}: {}".format(PROG, one_line(str(message)))


def print_error(message: object) -> None:
    """:func:`error_line` on the current ``sys.stderr``."""
    print(error_line(message), file=sys.stderr)


def level_name(debug: bool = False, verbose: bool = False, quiet: bool = False) -> str:
    """The level ``--debug``, ``-v/--verbose`` or ``-q/--quiet`` select (in that precedence;
    none of them: WARNING)."""
    if debug:
        return "DEBUG"
    if verbose:
        return "INFO"
    if quiet:
        return "ERROR"
    return "WARNING"


class LogFormatter(logging.Formatter):
    """``npu-dump-hook: warning: <message>`` on one line; a :data:`NOTICE` record has no level
    name: ``npu-dump-hook: <message>``.

    ``names``: the logger's name before the message (``--debug``). ``drop_script_prefix``: a
    message that starts with ``npu_dump_hook: `` (worded for plain scripts) loses that prefix,
    which the program name replaces (the runner's child process).
    """

    def __init__(self, names: bool = False, drop_script_prefix: bool = False) -> None:
        super().__init__()
        self.names = names
        self.drop_script_prefix = drop_script_prefix

    def format(self, record: logging.LogRecord) -> str:
        text = one_line(record.getMessage())
        if self.drop_script_prefix and text.startswith(_SCRIPT_PREFIX):
            text = text[len(_SCRIPT_PREFIX):]
        where = "{}: ".format(record.name) if self.names else ""
        level = "" if getattr(record, NOTICE, False) else record.levelname.lower() + ": "
        return "{}: {}{}{}".format(PROG, level, where, text)
