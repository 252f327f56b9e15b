"""A project's app module: it declares no task itself; ``include`` names where they are."""

from __future__ import annotations

import tether

app = tether.App(include=["tests.api.proj.tasks"], lease_ttl=2.0)
