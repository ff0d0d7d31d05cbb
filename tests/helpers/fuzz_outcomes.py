"""Tallies of what each reader did with fuzzed input: ``ok``, one of our errors, or an escape."""
import collections

from npu_dump_hook.errors import NpuDumpError


def new_tally():
    """reader name -> Counter of outcomes."""
    return collections.defaultdict(collections.Counter)


def attempt(outcomes, reader, call, *args, **kwargs):
    """Run ``call``; our errors are expected outcomes, anything else is recorded and re-raised."""
    try:
        result = call(*args, **kwargs)
    except NpuDumpError as exc:
        outcomes[reader][type(exc).__name__] += 1
        return None
    except BaseException as exc:
        outcomes[reader]["ESCAPE " + type(exc).__name__] += 1
        raise
    outcomes[reader]["ok"] += 1
    return result


def report(outcomes, title):
    """Print (and append to $NPU_FUZZ_REPORT) the total calls, the escapes by type (0 when
    none) and each reader's outcomes."""
    import os

    total = sum(sum(counter.values()) for counter in outcomes.values())
    escapes = collections.Counter()
    for counter in outcomes.values():
        for key, count in counter.items():
            if key.startswith("ESCAPE "):
                escapes[key[len("ESCAPE "):]] += count
    lines = ["{}: {} reader calls, escapes: {}".format(title, total, dict(escapes) or 0)]
    lines += ["  {:<22} {}".format(reader, dict(counter)) for reader, counter in sorted(outcomes.items())]
    path = os.environ.get("NPU_FUZZ_REPORT")
    if path:
        with open(path, "a") as handle:
            handle.write("\n".join(lines) + "\n")
    print("\n" + "\n".join(lines))
