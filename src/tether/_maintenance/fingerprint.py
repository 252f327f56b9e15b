"""The maintenance settings a leader acts with, written where every process can read them.

Why: each process builds its settings from its own code and environment, and a standalone
``tether reaper`` started without the app once ran with the defaults (it pruned dead letters
after 7 days where the app keeps them 30). Nothing in the store showed it. Now each elector
stores a short, readable summary of the settings its duty depends on after its id in the
leader's holder string (``host:pid:id settings=ttl=30,grace=0,...``), and every maintainer
compares the current leaders' summaries with its own (``Store.leader_get``), reporting a
disagreement at ERROR, naming the settings that differ.
"""

from __future__ import annotations

from tether._config import Settings

#: Short key in the holder string -> the setting's name, per duty.
REAP_KEYS = {"ttl": "lease_ttl", "grace": "stall_grace", "lttl": "leader_ttl",
             "lretry": "leader_retry"}
PRUNE_KEYS = {"done": "retention_done", "failed": "retention_failed",
              "cancelled": "retention_cancelled", "lttl": "leader_ttl",
              "lretry": "leader_retry"}


def _value(settings: Settings, name: str) -> float:
    if name == "leader_ttl":
        return settings.leader_lease
    if name == "leader_retry":
        return settings.leader_retry_every
    value: float = getattr(settings, name)
    return value


def tag(settings: Settings, keys: dict[str, str]) -> str:
    """``ttl=30,grace=0,...``: compact, stable, and still readable in ``tether stats``."""
    return ",".join(f"{short}={_value(settings, name):g}" for short, name in keys.items())


def parse(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if sep:
            out[key] = value
    return out


def differences(theirs: str, ours: str, keys: dict[str, str]) -> list[str]:
    """``name: theirs vs ours`` for every setting both tags give and that differs."""
    a, b = parse(theirs), parse(ours)
    return [f"{keys.get(k, k)}={a[k]} there, {b[k]} here" for k in b
            if k in a and a[k] != b[k]]
