"""Transitional: :mod:`envforge.env.layout` imports :func:`installed_version` from this path.

The engine was split by concept (:mod:`.states`, :mod:`.planning`, :mod:`.journal`,
:mod:`.applying`, :mod:`.reverting`); ``installed_version`` lives in :mod:`.planning`. Delete this
module once ``envforge.env.layout`` imports it from there.
"""

from __future__ import annotations

from envforge.patching.planning import installed_version

__all__ = ["installed_version"]
