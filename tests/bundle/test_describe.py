"""bundle.describe: the coverage tally that keeps no list of every dumped name agrees with coverage()."""
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_dump_hook.bundle.describe import CoverageTally, GraphOps, coverage

names = st.text("abc_/", min_size=1, max_size=3)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(expected=st.sets(names), others=st.sets(names), dumped=st.lists(names), with_graph=st.booleans())
def test_coverage_tally_gives_what_coverage_gives(expected, others, dumped, with_graph):
    ops = GraphOps(sorted(expected), set(expected) | set(others), len(expected | others)) if with_graph else None
    tally = CoverageTally(ops)
    counts = {}
    for name in dumped:
        tally.add(name)
        counts[name] = counts.get(name, 0) + 1
    assert coverage(ops, tally) == tally.result() == coverage(ops, counts)
