"""Settings, validated once at construction so a bad value fails before any job is touched.

The recovery bound rests on these relations, so they are enforced here, not hoped for:

* ``heartbeat_interval < lease_ttl`` (default a third of it: two beats may be lost before the
  lease lapses);
* the reaper looks at least once per ``lease_ttl`` (``reaper_interval`` is capped to it), so a
  lease granted after the reaper's last look is still seen before it expires;
* ``leader_ttl + leader_retry <= lease_ttl``, so when the maintenance leader itself dies a new
  one is reaping before any lease it left behind has expired.

With these, a job whose worker died runs again within
``lease_ttl + stall_grace + 2 s`` (see docs/guarantees.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

from tether._errors import ConfigError


@dataclass(frozen=True, slots=True)
class Settings:
    lease_ttl: float = 30.0
    heartbeat_interval: float | None = None  # default lease_ttl / 3
    stall_grace: float = 0.0
    reaper_interval: float = 5.0  # 0 disables the reaper in workers
    # How often each maintainer asks the store which worker processes died (issue #22): a
    # dead process's jobs come back within about this (plus a claim), not at lease expiry.
    # 0 turns death detection off (the lease alone decides).
    death_check_interval: float = 0.25
    shutdown_timeout: float = 30.0
    poll_interval: float = 1.0
    claim_batch: int = 100
    election: bool = True
    leader_ttl: float | None = None  # default min(15, lease_ttl / 2)
    leader_retry: float | None = None  # default leader_ttl / 3
    prune_interval: float = 60.0  # 0 disables pruning
    retention_done: float = 86_400.0
    retention_failed: float = 7 * 86_400.0
    retention_cancelled: float = 7 * 86_400.0
    # A job of a task no worker knows is handed back (a rolling deploy may bring a worker that
    # knows it) until this long after the first worker said it did not know it; then it is
    # dead-lettered with reason unknown_task. 0 dead-letters at once.
    unknown_task_timeout: float = 3_600.0
    log_format: str | None = None  # "text" or "json"; default $TETHER_LOG_FORMAT, else text

    @property
    def heartbeat_every(self) -> float:
        hb = self.heartbeat_interval
        return hb if hb is not None else self.lease_ttl / 3

    @property
    def reap_every(self) -> float:
        return min(self.reaper_interval, self.lease_ttl)

    @property
    def leader_lease(self) -> float:
        return self.leader_ttl if self.leader_ttl is not None else min(15.0, self.lease_ttl / 2)

    @property
    def leader_retry_every(self) -> float:
        return self.leader_retry if self.leader_retry is not None else self.leader_lease / 3

    @property
    def recovery_bound(self) -> float:
        """The documented worst case from a worker's death to its job being claimable again."""
        return self.lease_ttl + self.stall_grace + 2.0


_NON_NEGATIVE = ("stall_grace", "reaper_interval", "shutdown_timeout", "prune_interval",
                 "unknown_task_timeout", "death_check_interval")
_POSITIVE = ("lease_ttl", "poll_interval", "retention_done", "retention_failed",
             "retention_cancelled")
_OPTIONAL_POSITIVE = ("heartbeat_interval", "leader_ttl", "leader_retry")


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number of seconds, got {value!r}")
    return float(value)


def make_settings(**options: Any) -> Settings:
    """Build and check Settings; every message names the option and what to change."""
    known = {f.name for f in fields(Settings)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(
            f"unknown option(s) {', '.join(unknown)}; known options: {', '.join(sorted(known))}"
        )
    for name in _POSITIVE:
        if name in options and _number(name, options[name]) <= 0:
            raise ConfigError(f"{name} must be > 0, got {options[name]!r}")
    for name in _NON_NEGATIVE:
        if name in options and _number(name, options[name]) < 0:
            raise ConfigError(f"{name} must be >= 0, got {options[name]!r}")
    for name in _OPTIONAL_POSITIVE:
        if options.get(name) is not None and _number(name, options[name]) <= 0:
            raise ConfigError(f"{name} must be > 0, got {options[name]!r}")
    batch = options.get("claim_batch", 100)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigError(f"claim_batch must be an integer >= 1, got {batch!r}")
    if "election" in options and not isinstance(options["election"], bool):
        raise ConfigError(f"election must be True or False, got {options['election']!r}")
    if options.get("log_format") not in (None, "text", "json"):
        raise ConfigError(f"log_format must be 'text' or 'json', got {options['log_format']!r}")
    settings = replace(Settings(), **options)
    if settings.heartbeat_every >= settings.lease_ttl:
        raise ConfigError(
            f"heartbeat_interval ({settings.heartbeat_every}s) must be shorter than lease_ttl "
            f"({settings.lease_ttl}s); use about lease_ttl / 3 so two lost beats do not lose "
            "the lease"
        )
    if settings.leader_lease + settings.leader_retry_every > settings.lease_ttl:
        raise ConfigError(
            f"leader_ttl + leader_retry ({settings.leader_lease + settings.leader_retry_every}s) "
            f"must not exceed lease_ttl ({settings.lease_ttl}s), or a dead maintenance leader "
            "delays recovery past the documented bound; lower leader_ttl"
        )
    if settings.leader_retry_every >= settings.leader_lease:
        raise ConfigError("leader_retry must be shorter than leader_ttl")
    return settings
