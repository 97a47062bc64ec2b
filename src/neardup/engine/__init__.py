"""Executors for the pipeline's stages.

A stage is a plain function over a list of tasks; it never knows whether those tasks run
inline, in local worker processes or (later) on Spark. The local engine is the default.
"""

from neardup.engine.local import LocalEngine, default_workers

__all__ = ["LocalEngine", "default_workers"]
