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
