"""The bundle path on stdout, however the script ends and whichever process trained.

Contract (one per runner process, made before the script runs)::

    notice = BundleNotice()
    notice.written(location)     # the hook's end() wrote a bundle: printed at once, so a script
                                 # that leaves with os._exit() still shows it; in a forked
                                 # child also handed to the process that started the script
    notice.last_line(own)        # at exit: the path to print as the last line, or None when it
                                 # already is (nothing was printed since) or there is none

A script that trains in a forked child (``multiprocessing`` with fork, ``os.fork``) has its
hook, and its bundle, in the child: the child writes the path into a pipe made here (inherited
through fork, never by an exec'd program), and the script's own process reports it at exit
instead of "nothing was dumped". Only stdout writes through ``sys.stdout`` are seen; after the
path is printed, ``sys.stdout`` is a thin proxy that notes whether anything followed.

Under ``npu-dump-hook run`` (:class:`NoticeChannel`, in the command's own process) the child also
reports to the command through an inherited pipe (its descriptor in :data:`NOTICE_FD_ENV`):
``B{path}`` when a bundle is written, ``A`` when the path is the last line printed, ``W`` when
the script printed after it. A script that leaves by ``os._exit`` after printing more runs no
exit handler, so the command prints the path once the child has exited, when the last record is
not ``A``.
"""
import fcntl
import os
import sys
from typing import Any, Callable, Dict, List, Optional

__all__ = ["BundleNotice", "NoticeChannel", "NOTICE_FD_ENV"]

#: The write end of the command's pipe in the child (internal to ``npu-dump-hook run``).
NOTICE_FD_ENV = "NPU_DUMP_HOOK_NOTICE_FD"


class _Watched(object):
    """``sys.stdout`` as it was, noting whether anything was written through it."""

    def __init__(self, stream: Any, first_write: Callable[[], None]) -> None:
        self._stream = stream
        self._first_write = first_write
        self.written = False

    def _note(self) -> None:
        if not self.written:
            self.written = True
            self._first_write()

    def write(self, text: str) -> int:
        if text:
            self._note()
        return self._stream.write(text)

    def writelines(self, lines: Any) -> None:
        self._note()
        self._stream.writelines(lines)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class BundleNotice(object):
    """See the module doc."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.printed = None  # type: Optional[str]
        self._watch = None  # type: Optional[_Watched]
        try:
            self._read, self._write = os.pipe()
            fcntl.fcntl(self._read, fcntl.F_SETFL, fcntl.fcntl(self._read, fcntl.F_GETFL) | os.O_NONBLOCK)
        except OSError:  # no descriptors left: a forked child's bundle just goes unreported
            self._read = self._write = -1
        self._command = _command_fd()

    def _tell_command(self, record: bytes) -> None:
        if self._command >= 0:
            try:
                os.write(self._command, record + b"\0")
            except OSError:
                self._command = -1

    def written(self, location: Optional[str]) -> None:
        if not location:
            return
        if os.getpid() != self.pid and self._write >= 0:
            try:
                os.write(self._write, os.fsencode(location) + b"\0")
            except OSError:
                pass
        self._tell_command(b"B" + os.fsencode(location))
        _print(location)
        self.printed = location
        self._tell_command(b"A")
        if sys.stdout is not None and not isinstance(sys.stdout, _Watched):
            self._watch = sys.stdout = _Watched(sys.stdout, lambda: self._tell_command(b"W"))
        elif isinstance(sys.stdout, _Watched):
            self._watch = sys.stdout
            self._watch.written = False

    def printed_last(self, location: str) -> None:
        """``location`` was just printed as the last line (at exit)."""
        self._tell_command(b"A")

    def last_line(self, own: Optional[str]) -> Optional[str]:
        """What the last line must still be (module doc)."""
        location = own or self._from_children()
        if location is None:
            return None
        if location == self.printed and (self._watch is None or not self._watch.written):
            return None
        return location

    def _from_children(self) -> Optional[str]:
        if self._read < 0 or os.getpid() != self.pid:
            return None
        chunks = []  # type: List[bytes]
        while True:
            try:
                chunk = os.read(self._read, 65536)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            chunks.append(chunk)
        found = [part for part in b"".join(chunks).split(b"\0") if part]
        return os.fsdecode(found[-1]) if found else None


def _command_fd() -> int:
    """The command's pipe (:data:`NOTICE_FD_ENV`), kept from programs the script execs; -1: none."""
    text = os.environ.pop(NOTICE_FD_ENV, "")
    if not text.isdigit():
        return -1
    try:
        os.set_inheritable(int(text), False)
    except OSError:
        return -1
    return int(text)


class NoticeChannel(object):
    """The command's end (module doc)::

        channel = NoticeChannel()
        child = subprocess.Popen(argv, env=dict(env, **channel.env()), pass_fds=channel.fds)
        channel.started()
        child.wait()
        channel.print_if_not_last()
    """

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        self.fds = (self._write,)

    def env(self) -> Dict[str, str]:
        return {NOTICE_FD_ENV: str(self._write)}

    def started(self) -> None:
        """The child has its copy of the write end: ours is closed (EOF once the child's are)."""
        os.close(self._write)

    def print_if_not_last(self) -> None:
        """After the child exited: print the bundle path when the child's last record is not ``A``."""
        fcntl.fcntl(self._read, fcntl.F_SETFL, fcntl.fcntl(self._read, fcntl.F_GETFL) | os.O_NONBLOCK)
        data = b""
        while True:
            try:
                chunk = os.read(self._read, 65536)
            except OSError:  # a forked grandchild still holds the write end: what is there is enough
                break
            if not chunk:
                break
            data += chunk
        os.close(self._read)
        location, last = None, None
        for record in (r for r in data.split(b"\0") if r):
            if record.startswith(b"B"):
                location = os.fsdecode(record[1:])
            last = record[:1]
        if location is not None and last != b"A":
            _print(location)


def _print(location: str) -> None:
    try:
        sys.stdout.flush()
        print(location)
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):  # stdout closed by its reader (| head) or by the script
        pass
