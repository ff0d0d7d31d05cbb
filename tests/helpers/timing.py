"""Best-of-N timing for the linear-time tests of the fuzz suites."""
import time

from npu_dump_hook.errors import NpuDumpError


def best_time(call, arg, repeat=3, clock=time.perf_counter):
    """Best time by ``clock`` of ``call(arg)`` over ``repeat`` runs; our errors count as runs
    (a reader refusing a large input must refuse it in linear time too)."""
    best = float("inf")
    for _ in range(repeat):
        start = clock()
        try:
            call(arg)
        except NpuDumpError:
            pass
        best = min(best, clock() - start)
    return best


def bounded(call, timeout_s, what="blocked"):
    """``call()`` on a daemon thread; the test fails (instead of hanging the suite) when it has not
    returned after ``timeout_s`` seconds. Its exception, if any, is raised here."""
    import threading

    outcome = {}

    def run():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout_s)
    assert not thread.is_alive(), "{} for {} s".format(what, timeout_s)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
