"""Peak RSS growth and time of reader calls, each in a fork of one fresh interpreter.

A fresh child imports the readers once; every case then runs in a fork of it, so the peak
(``ru_maxrss`` minus the VmRSS at the fork) counts what that one call allocated, protobuf's C
allocations included. ``readers`` is Python source that imports what it needs and defines
``run(reader, arg)``; :func:`measure` returns ``[(bytes, seconds, outcome)]`` per case, the
outcome ``"ok"``, ``"<our error>: ..."`` or ``"ESCAPE <exception>: ..."``.
"""
import json
import os
import subprocess
import sys

_HEAD = r"""
import gc, json, os, resource, sys, time
from npu_dump_hook.errors import NpuDumpError

def vmrss_kib():
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
"""

_FORKS = r"""
results = []
for reader, arg in json.loads(sys.argv[1]):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        gc.collect()
        base = vmrss_kib()
        start = time.perf_counter()
        try:
            run(reader, arg)
            outcome = "ok"
        except NpuDumpError as exc:
            outcome = type(exc).__name__ + ": " + str(exc)[-120:]
        except BaseException as exc:
            outcome = "ESCAPE " + type(exc).__name__ + ": " + str(exc)[-120:]
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        os.write(write, json.dumps([peak - base, time.perf_counter() - start, outcome]).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    chunks = []
    while True:
        chunk = os.read(read, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read)
    results.append(json.loads(b"".join(chunks).decode()))
print(json.dumps(results))
"""

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def measure(readers, cases):
    """[(peak RSS growth in bytes, seconds, outcome)] for (reader, arg) ``cases``, in forks of one fresh child."""
    env = dict(os.environ, PYTHONPATH=_ROOT)
    out = subprocess.run([sys.executable, "-c", _HEAD + readers + _FORKS, json.dumps(cases)],
                         stdout=subprocess.PIPE, check=True, env=env, timeout=600).stdout
    return [(kib * 1024, seconds, outcome) for kib, seconds, outcome in json.loads(out.decode().splitlines()[-1])]
