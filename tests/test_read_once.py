"""The captured step's variables are read once before it: the state fingerprints join the capture's read."""
from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.train import _capture_reads, fingerprints
from npu_dump_hook.sample_models import mlp_session


def _holder(element):
    op = element.op
    return op.inputs[0].op.name if op.type == "ReadVariableOp" else op.name


def test_variables_are_read_once_before_the_captured_step(in_tmp_cwd, monkeypatch):
    reads = {"before": [], "after": [], "state alone": []}
    phase = ["before"]
    real_read, real_after = _capture_reads.read_values, _capture_reads.VariableReads.after

    def capture_read(session, elements):
        reads[phase[0]].extend(_holder(e) for e in elements)
        return real_read(session, elements)

    def state_read(session, elements):
        reads["state alone"].extend(_holder(e) for e in elements)
        return real_read(session, elements)

    def after(self, session, updates):
        phase[0] = "after"
        return real_after(self, session, updates)

    monkeypatch.setattr(_capture_reads, "read_values", capture_read)
    monkeypatch.setattr(fingerprints, "read_values", state_read)
    monkeypatch.setattr(_capture_reads.VariableReads, "after", after)
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", collect=False)
    mlp_session.train(hook.options, hooks=[hook])
    state = {entry["name"] for entry in hook.record.fingerprints["state"]}
    assert reads["state alone"] == []  # no read of its own: the capture's read took the state
    assert sorted(reads["before"]) == sorted(set(reads["before"])) and state <= set(reads["before"])
    assert reads["after"] and set(reads["after"]) <= set(reads["before"])  # the same fetch lists again
