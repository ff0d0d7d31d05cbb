"""Sample models that use npu_dump_hook exactly as a user would (importable as
``npu_dump_hook.sample_models``). Each module imports TensorFlow, so import them
one by one: ``cnn_estimator``, ``deep_cnn``, ``mlp_session``, ``text_model``.
"""
