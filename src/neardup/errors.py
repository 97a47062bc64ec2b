"""The one exception about parameters, below every layer.

Kernels raise `SettingsError` too (a common-shingle filter counted with other sketch settings)
and may not import `neardup.config`; `neardup.config` re-exports it, so
`neardup.config.SettingsError` is this very class. It sits in a module of its own, outside
the `kernels` package, so that importing the settings (every reader, the CLI, a worker) does
not load numba and every kernel with it.
"""

from __future__ import annotations


class SettingsError(ValueError):
    """Raised for an impossible combination of parameters, or a mismatch with stored data."""
