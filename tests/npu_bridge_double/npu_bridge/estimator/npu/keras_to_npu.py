"""Double of ``npu_bridge.estimator.npu.keras_to_npu`` (reference §13 ``model_to_npu_estimator``).

``model_to_npu_estimator`` turns a Keras model into an ``NPUEstimator``: TensorFlow's
``model_to_estimator`` builds the model function and saves the Keras weights to a checkpoint in a
session of its own (``{model_dir}/keras/``), which the estimator warm-starts from before training;
the double then builds the ``NPUEstimator`` with that model function, ``config`` (an
``NPURunConfig``) and the same warm start.
"""
import tensorflow as tf

from npu_bridge.estimator.npu.npu_estimator import NPUEstimator


def model_to_npu_estimator(keras_model=None, keras_model_path=None, custom_objects=None, model_dir=None,
                           checkpoint_format="saver", config=None, job_start_file=""):
    """An ``NPUEstimator`` training ``keras_model`` (or the model saved at ``keras_model_path``)."""
    keras = tf.compat.v1.keras.estimator.model_to_estimator(
        keras_model=keras_model, keras_model_path=keras_model_path, custom_objects=custom_objects,
        model_dir=model_dir, config=config, checkpoint_format=checkpoint_format)
    return NPUEstimator(model_fn=keras.model_fn, model_dir=keras.model_dir, config=config,
                        job_start_file=job_start_file, warm_start_from=keras._warm_start_settings)
