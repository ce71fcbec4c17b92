"""Optional dependencies, imported when a feature needs them."""

from __future__ import annotations

from typing import Any

__all__ = ["pandas"]


def pandas(what: str) -> Any:
    """The ``pandas`` module, for ``what`` (a method such as ``"Comparison.to_pandas"``).

    Raises:
        ImportError: pandas is not installed, naming ``what`` and the extra that brings it
            (``pip install "simcoll[pandas]"``).
    """
    try:
        import pandas as pd  # type: ignore[import-untyped]
    except ImportError as err:
        raise ImportError(f'{what} needs pandas: pip install "simcoll[pandas]"') from err
    return pd
