"""Synthetic data shared by the sample models (no downloads: fixed NumPy seeds)."""
import numpy as np


def mnist_like(count=256, seed=0):
    """``count`` 28x28x1 float32 images in [0, 1) and int32 labels in [0, 10)."""
    rng = np.random.RandomState(seed)
    images = rng.random_sample((count, 28, 28, 1)).astype(np.float32)
    labels = rng.randint(0, 10, size=(count,)).astype(np.int32)
    return images, labels


def tabular(count=256, features=20, seed=1):
    rng = np.random.RandomState(seed)
    x = rng.standard_normal((count, features)).astype(np.float32)
    y = (x[:, :3].sum(axis=1) > 0).astype(np.int32)
    return x, y


def token_sequences(count=128, length=12, vocab=50, seed=2):
    rng = np.random.RandomState(seed)
    tokens = rng.randint(1, vocab, size=(count, length)).astype(np.int32)
    labels = (tokens[:, 0] % 2).astype(np.int32)
    return tokens, labels
