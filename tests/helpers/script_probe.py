"""A script that reports how it was started, then ends as told (no TensorFlow).

usage: script_probe.py [ok | exit N | raise | option_error | message | signal]
Prints one JSON line: __file__, sys.argv, sys.path[0], __name__, whether tensorflow is loaded
and whether npu_dump_hook.runner's injection is installed and enabled; then exits 0, exits N,
raises RuntimeError, raises an OptionError of its own (about a fault), exits with a message, or kills itself with SIGTERM.
"""
import json
import os
import signal
import sys


def fail():
    raise RuntimeError("boom from the script")


runner = sys.modules.get("npu_dump_hook.runner")
injection = runner.installed() if runner is not None else None
print(json.dumps({"file": __file__, "argv": sys.argv, "path0": sys.path[0], "name": __name__,
                  "tensorflow": "tensorflow" in sys.modules,
                  "injected": None if injection is None else injection.settings.enabled}))
sys.stdout.flush()
action = sys.argv[1] if len(sys.argv) > 1 else "ok"
if action == "exit":
    sys.exit(int(sys.argv[2]))
elif action == "raise":
    fail()
elif action == "option_error":
    from npu_dump_hook.errors import OptionError

    raise OptionError("faults", {"its/own": "nan"}, "the script's own check")
elif action == "message":
    sys.exit("bye from the script")
elif action == "signal":
    os.kill(os.getpid(), signal.SIGTERM)
