"""Retry delays: exponential with jitter, so a failing dependency is not hammered in lockstep."""

from __future__ import annotations

import random
from dataclasses import dataclass

from tether._errors import ConfigError


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delay before retry n (1-based): ``min(max, base * factor ** (n - 1))`` ± ``jitter``.

    ``jitter`` is a fraction: 0.1 spreads each delay over ±10 %.
    """

    base: float = 1.0
    factor: float = 2.0
    max: float = 300.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if self.base < 0 or self.max < 0:
            raise ConfigError("Backoff base and max must be >= 0")
        if self.factor < 1:
            raise ConfigError("Backoff factor must be >= 1")
        if not 0 <= self.jitter <= 1:
            raise ConfigError("Backoff jitter must be between 0 and 1")

    def delay(self, failures: int, rng: random.Random | None = None) -> float:
        raw = min(self.max, self.base * self.factor ** max(0, failures - 1))
        if self.jitter == 0 or raw == 0:
            return raw
        spread = raw * self.jitter
        return max(0.0, raw + (rng or random).uniform(-spread, spread))
