"""Double of ``npu_bridge.npu_init``: the star-import users write."""
from npu_bridge.estimator.npu.npu_config import DumpConfig, NPURunConfig  # noqa: F401
from npu_bridge.estimator.npu.npu_estimator import NPUEstimator  # noqa: F401
