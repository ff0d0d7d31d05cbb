"""The folder to put on ``PYTHONPATH`` for :mod:`npu_dump_hook.runner`'s environment-only mode.

It holds only :mod:`sitecustomize <npu_dump_hook._site.sitecustomize>` (and this file, so the
folder ships in the package); ``python -m npu_dump_hook.runner --pythonpath`` prints its path.
"""
