"""The batches tests/helpers/inference_scripts.py feeds, in order (numpy only: tests import it too)."""
import numpy as np

BATCH, BATCHES, FEATURES = 4, 3, 6


def data(seed=0):
    """``(x, labels)`` of BATCHES batches of BATCH rows; ``seed`` 1 is the training data."""
    rng = np.random.RandomState(seed)
    x = rng.rand(BATCH * BATCHES, FEATURES).astype(np.float32)
    return x, (x.sum(axis=1) > FEATURES / 2.0).astype(np.int64)
