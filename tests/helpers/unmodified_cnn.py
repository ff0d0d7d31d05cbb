"""An unmodified training script (no NpuDumpHook in it): the sample CNN (npu_dump_hook.sample_models.
cnn_estimator's model) trained 1000 steps on shuffled synthetic images.

usage: unmodified_cnn.py MODEL_DIR [DATA_SEED]
DATA_SEED (default 0, the sample model's data) picks other images: a run fed another batch.
"""
import sys

import tensorflow as tf

from npu_dump_hook.sample_models import _data, cnn_estimator


def input_fn(seed):
    images, labels = _data.mnist_like(seed=seed)
    dataset = tf.data.Dataset.from_tensor_slices(({"image": images}, labels))
    return dataset.shuffle(buffer_size=256).repeat().batch(8, drop_remainder=True)


def main(model_dir, seed):
    config = tf.estimator.RunConfig(model_dir=model_dir, save_summary_steps=None, log_step_count_steps=None)
    estimator = tf.estimator.Estimator(cnn_estimator.model_fn, config=config)
    estimator.train(lambda: input_fn(seed), steps=1000)
    print("trained to step", estimator.get_variable_value("global_step"))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0)
