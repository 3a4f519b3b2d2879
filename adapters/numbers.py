"""Numbers as gangplan's output prints them: thousands separators, GPU shares to three
decimals, and counted nouns (``1 node``, ``2,048 nodes``, ``1.5 GPUs``)."""

from __future__ import annotations

__all__ = ["counted", "number"]


def number(k: float) -> str:
    """``k`` with thousands separators: ``3,214``; a fraction (a GPU share's GPUs) to at
    most three decimals: ``12.5``, ``0.25``."""
    return f"{int(k):,}" if float(k).is_integer() else f"{k:,.3f}".rstrip("0")


def counted(k: float, word: str) -> str:
    """``k`` (:func:`number`) and ``word``, which takes ``s`` unless ``k`` is 1: ``1 node``,
    ``3 nodes``, ``1 pending gang``, ``2.5 GPUs``."""
    return f"{number(k)} {word}" if k == 1 else f"{number(k)} {word}s"
