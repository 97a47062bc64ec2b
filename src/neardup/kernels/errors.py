"""The one exception the kernels raise about parameters.

`SettingsError` lives here, in the bottom layer, because kernels raise it too (a common-shingle
filter counted with other sketch settings) and kernels may not import `neardup.config`.
`neardup.config` re-exports it, so `neardup.config.SettingsError` is this very class.
"""

from __future__ import annotations


class SettingsError(ValueError):
    """Raised for an impossible combination of parameters, or a mismatch with stored data."""
