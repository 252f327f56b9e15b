"""Five-field cron expressions in a time zone, and when they fire (issue #12). No dependencies.

Syntax: ``minute hour day-of-month month day-of-week``, each field ``*``, a number, a range
``a-b``, a step ``*/n`` or ``a-b/n`` or ``a/n`` (from ``a`` to the field's end), or a comma list
of those. Months and days of the week take names (``jan``..``dec``, ``sun``..``sat``, any case);
day-of-week 0 and 7 are both Sunday. The day fields follow Vixie cron (and cronsim, which a
test compares against): when either starts with ``*`` (``*``, ``*/2``) a day must match *both*
(``0 9 */2 * mon``: odd days that are Mondays); when neither does, a day matches when *either*
does (``0 9 1,15 * mon``: the 1st, the 15th and every Monday). Aliases: ``@yearly`` (``@annually``),
``@monthly``, ``@weekly``, ``@daily`` (``@midnight``), ``@hourly``.

Invariant (the DST rule): a schedule fires at most once per *instant*, and never silently loses
a wall-clock time:

* a local time that does not exist (the hour skipped when clocks go forward) fires once, at the
  first instant after the gap (02:30 on a night that jumps from 02:00 to 03:00 fires at 03:00;
  every time inside the gap, and 03:00 itself, are that one instant, so it fires once);
* a local time that exists twice (the hour repeated when clocks go back) fires at its first
  occurrence; it fires again in the repeated hour's second pass only when the expression's
  minute or hour field is a wildcard (starts with ``*``: ``*/5 * * * *``, ``0 * * * *``,
  ``@hourly``), Vixie cron's rule. So a fixed-time job (``30 1 * * *``) runs once that night,
  while a job that runs every few minutes or every hour keeps its pace in real time instead of
  going silent for the repeated hour.

Ticks are the epoch seconds of those instants, so every process computes the same float for
the same tick (the store dedups on it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo

#: How far ahead a match is searched for; an expression with none (``0 0 30 2 *``) is refused.
SEARCH_YEARS = 8
ALIASES = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {n: i + 1 for i, n in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])}
_DAYS = {n: i for i, n in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (  # name, low, high, names
    ("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS), ("day of week", 0, 7, _DAYS),
)
_PART = re.compile(r"^(\*|[a-z0-9]+)(?:-([a-z0-9]+))?(?:/(\d+))?$")
_MINUTE = timedelta(minutes=1)
#: How far around a time an offset change is looked for (longer than any zone's fold): the
#: second passes of a repeated hour are searched only when clocks go back within this of it.
_FOLD_SPAN = 3 * 3600.0


class CronError(ValueError):
    """A cron expression tether cannot use; the message names the field."""


def _value(text: str, field: str, low: int, high: int, names: dict[str, int]) -> int:
    if text in names:
        return names[text]
    if not text.isdigit():
        raise CronError(f"cron {field}: {text!r} is not a number"
                        + (f" or a name ({', '.join(names)})" if names else ""))
    value = int(text)
    if not low <= value <= high:
        raise CronError(f"cron {field}: {value} is outside {low}-{high}")
    return value


def _field(text: str, field: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        match = _PART.match(part)
        if match is None:
            raise CronError(f"cron {field}: cannot read {part!r}")
        start_s, end_s, step_s = match.groups()
        step = int(step_s) if step_s else 1
        if step < 1:
            raise CronError(f"cron {field}: step must be >= 1 in {part!r}")
        if start_s == "*":
            if end_s is not None:
                raise CronError(f"cron {field}: cannot read {part!r}")
            start, end = low, high
        else:
            start = _value(start_s, field, low, high, names)
            end = _value(end_s, field, low, high, names) if end_s else (
                high if step_s else start)
            if end < start:
                raise CronError(f"cron {field}: range {part!r} runs backwards")
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class Cron:
    """A parsed expression; :meth:`next_after` gives the next tick in a zone."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    day_star: bool  # day of month starts with * (Vixie's DOM_STAR)
    weekday_star: bool  # day of week starts with * (Vixie's DOW_STAR)
    wild: bool = False  # minute or hour starts with *: fires in both passes of a repeated hour

    @classmethod
    def parse(cls, text: str) -> Cron:
        if not isinstance(text, str):
            raise CronError(f"cron must be a string, got {type(text).__name__}")
        spec = " ".join(text.lower().split())
        if spec.startswith("@"):
            if spec not in ALIASES:
                raise CronError(f"unknown cron alias {text!r}; known: {', '.join(ALIASES)}")
            spec = ALIASES[spec]
        parts = spec.split(" ")
        if len(parts) != 5:
            raise CronError(f"cron {text!r} must have 5 fields (minute hour day-of-month "
                            f"month day-of-week), it has {len(parts)}")
        sets = [_field(p, *f) for p, f in zip(parts, _FIELDS, strict=True)]
        weekdays = frozenset(d % 7 for d in sets[4])
        made = cls(text, sets[0], sets[1], sets[2], sets[3], weekdays,
                   parts[2].startswith("*"), parts[4].startswith("*"),
                   parts[0].startswith("*") or parts[1].startswith("*"))
        start = datetime(2000, 1, 1)
        if made._next_local(start) is None:
            raise CronError(f"cron {text!r} never fires (no matching day within "
                            f"{SEARCH_YEARS} years)")
        return made

    def _day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.day_star or self.weekday_star:
            return dom and dow
        return dom or dow

    def _next_local(self, start: datetime) -> datetime | None:
        """The first matching naive wall-clock minute >= ``start`` (a whole minute)."""
        day = start.date()
        last = day + timedelta(days=366 * SEARCH_YEARS)
        first_day = True
        while day <= last:
            if self._day_matches(day):
                for hour in sorted(self.hours):
                    if first_day and hour < start.hour:
                        continue
                    for minute in sorted(self.minutes):
                        if first_day and hour == start.hour and minute < start.minute:
                            continue
                        return datetime(day.year, day.month, day.day, hour, minute)
            day += timedelta(days=1)
            first_day = False
        return None

    def next_after(self, t: float, tz: tzinfo) -> float:
        """The first tick strictly after epoch ``t`` in zone ``tz`` (see the DST rule)."""
        if self.wild and (fold := _fold_near(t, tz)):
            return self._next_in_fold(t, tz, fold)
        local = datetime.fromtimestamp(t, tz).replace(tzinfo=None)
        start = local.replace(second=0, microsecond=0) + _MINUTE
        while True:
            found = self._next_local(start)
            if found is None:
                raise CronError(f"cron {self.text!r} never fires after {local}")
            tick = instant(found, tz)
            if tick > t:
                return tick
            start = found + _MINUTE  # the second pass of a repeated hour: fires nothing

    def _next_in_fold(self, t: float, tz: tzinfo, fold: float) -> float:
        """``next_after`` for a wildcard expression near clocks going back: there, wall-clock
        order is not time order (the repeated hour's second pass comes after later wall
        times). A tick is the first occurrence of a matching wall time, or its second one;
        the first is at most ``fold`` seconds (how far clocks go back) before the second, and
        firsts grow with the wall time, so it walks matching wall times from ``fold`` before
        ``t`` and stops at the first whose first occurrence is later than the best tick."""
        start = datetime.fromtimestamp(t - fold, tz).replace(
            tzinfo=None, second=0, microsecond=0)
        best: float | None = None
        while True:
            found = self._next_local(start)
            if found is None:
                raise CronError(f"cron {self.text!r} never fires after {start}")
            first = instant(found, tz)
            if best is not None and first > best:
                return best
            for tick in (first, _second_pass(found, tz)):
                if tick is not None and tick > t and (best is None or tick < best):
                    best = tick
            start = found + _MINUTE


def _fold_near(t: float, tz: tzinfo) -> float:
    """How many seconds clocks go back within ``_FOLD_SPAN`` of ``t`` (0: they do not; clocks
    going forward repeat no time)."""
    before = datetime.fromtimestamp(t - _FOLD_SPAN, tz).utcoffset()
    after = datetime.fromtimestamp(t + _FOLD_SPAN, tz).utcoffset()
    if before is None or after is None:
        return 0.0
    return max(0.0, (before - after).total_seconds())


def _second_pass(naive: datetime, tz: tzinfo) -> float | None:
    """Epoch seconds of a repeated wall-clock time's second occurrence (None when it occurs
    once)."""
    first = naive.replace(tzinfo=tz, fold=0).timestamp()
    second = naive.replace(tzinfo=tz, fold=1).timestamp()
    return second if second > first and _exists(naive, tz) else None


def _exists(naive: datetime, tz: tzinfo) -> bool:
    aware = naive.replace(tzinfo=tz)
    back = datetime.fromtimestamp(aware.timestamp(), tz).replace(tzinfo=None)
    return back == naive


def instant(naive: datetime, tz: tzinfo) -> float:
    """Epoch seconds of a wall-clock time in ``tz``: its first occurrence when it is repeated
    (``fold=0``), the end of the gap when it was skipped (the first existing minute after it;
    zones change offsets on whole minutes)."""
    if tz is UTC:
        return naive.replace(tzinfo=tz).timestamp()
    probe = naive
    for _ in range(24 * 60):
        if _exists(probe, tz):
            return probe.replace(tzinfo=tz, fold=0).timestamp()
        probe += _MINUTE
    raise CronError(f"no valid local time after {naive} in {tz}")  # pragma: no cover


__all__ = ["ALIASES", "Cron", "CronError", "instant"]
