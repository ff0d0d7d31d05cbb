"""Readers and writers for every Ascend dump artefact (no TensorFlow needed)."""
