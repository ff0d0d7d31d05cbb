"""The exit codes of every ``npu-dump-hook`` command (DESIGN §4), in one place."""

__all__ = ["EXIT_OK", "EXIT_CHECK_FAILED", "EXIT_USAGE", "EXIT_ERROR"]

#: Everything went as asked.
EXIT_OK = 0
#: A check failed: verify found problems, compare breached a threshold, parse met a bad file.
EXIT_CHECK_FAILED = 1
#: Usage: bad arguments or option values, a path given that does not exist.
EXIT_USAGE = 2
#: Anything else (one line on stderr; the traceback only with --debug).
EXIT_ERROR = 3
