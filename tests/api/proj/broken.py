"""A task module that fails to import (its error must name it)."""

from __future__ import annotations

raise RuntimeError("this module is broken on purpose")
