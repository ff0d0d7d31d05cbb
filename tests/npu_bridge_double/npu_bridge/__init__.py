"""Test double of Huawei's npu_bridge (TF 1.x adapter). See tests/npu_bridge_double/README.md."""
