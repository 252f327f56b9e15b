"""The cron parser and the DST rule of tether._cron (issue #12)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo

import pytest

from tether._cron import Cron, CronError

NY = ZoneInfo("America/New_York")
PARIS = ZoneInfo("Europe/Paris")


def ticks(expr: str, start: str, tz: tzinfo, n: int) -> list[str]:
    cron = Cron.parse(expr)
    t = datetime.fromisoformat(start).replace(tzinfo=tz).timestamp()
    out = []
    for _ in range(n):
        t = cron.next_after(t, tz)
        assert t == int(t)  # whole seconds: every process computes the same float
        out.append(datetime.fromtimestamp(t, tz).isoformat())
    return out


def test_fields_lists_ranges_steps_and_names() -> None:
    cron = Cron.parse("0,30 8-10/2 * jan-mar,dec MON-fri")
    assert cron.minutes == {0, 30} and cron.hours == {8, 10}
    assert cron.months == {1, 2, 3, 12} and cron.weekdays == {1, 2, 3, 4, 5}
    assert Cron.parse("5/20 * * * *").minutes == {5, 25, 45}
    assert Cron.parse("* * * * 7").weekdays == {0}  # 7 is Sunday too
    assert ticks("0 9 * * mon-fri", "2026-11-20T10:00", UTC, 3) == [
        "2026-11-23T09:00:00+00:00", "2026-11-24T09:00:00+00:00", "2026-11-25T09:00:00+00:00"]


def test_aliases() -> None:
    assert ticks("@hourly", "2026-01-01T00:30", UTC, 2) == [
        "2026-01-01T01:00:00+00:00", "2026-01-01T02:00:00+00:00"]
    assert ticks("@monthly", "2026-11-20T10:00", UTC, 2) == [
        "2026-12-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00"]
    assert Cron.parse("@daily").minutes == Cron.parse("@midnight").minutes == {0}
    assert ticks("@weekly", "2026-11-20T10:00", UTC, 1) == ["2026-11-22T00:00:00+00:00"]
    assert ticks("@yearly", "2026-11-20T10:00", UTC, 1) == ["2027-01-01T00:00:00+00:00"]


def test_either_day_field_matches_when_both_are_restricted() -> None:
    # The 13th, or any Friday (every cron since Vixie's).
    assert ticks("0 0 13 * fri", "2026-11-20T10:00", UTC, 2) == [
        "2026-11-27T00:00:00+00:00", "2026-12-04T00:00:00+00:00"]
    assert ticks("0 0 13 * *", "2026-11-20T10:00", UTC, 1) == ["2026-12-13T00:00:00+00:00"]


def test_leap_day() -> None:
    assert ticks("0 0 29 2 *", "2026-11-20T10:00", UTC, 2) == [
        "2028-02-29T00:00:00+00:00", "2032-02-29T00:00:00+00:00"]


def test_next_after_is_strictly_after() -> None:
    cron = Cron.parse("* * * * *")
    t = datetime(2026, 1, 1, 0, 0, tzinfo=UTC).timestamp()
    assert cron.next_after(t, UTC) == t + 60
    assert cron.next_after(t - 0.5, UTC) == t


def test_a_skipped_local_time_runs_once_at_the_end_of_the_gap() -> None:
    # 2026-03-08: New York jumps from 02:00 to 03:00.
    assert ticks("30 2 * * *", "2026-03-07T12:00", NY, 3) == [
        "2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"]
    # 02:00, 02:20, 02:40 and 03:00 are one instant: it fires once, nothing is lost after.
    assert ticks("*/20 * * * *", "2026-03-08T01:10", NY, 5) == [
        "2026-03-08T01:20:00-05:00", "2026-03-08T01:40:00-05:00", "2026-03-08T03:00:00-04:00",
        "2026-03-08T03:20:00-04:00", "2026-03-08T03:40:00-04:00"]
    # Paris, 2026-03-29 02:00 -> 03:00.
    assert ticks("15 2 * * *", "2026-03-28T12:00", PARIS, 1) == ["2026-03-29T03:00:00+02:00"]


def test_a_repeated_fixed_local_time_runs_once_at_its_first_occurrence() -> None:
    # 2026-11-01: New York goes back from 02:00 EDT to 01:00 EST.
    assert ticks("30 1 * * *", "2026-10-31T12:00", NY, 2) == [
        "2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]
    assert ticks("0,30 1 * * *", "2026-11-01T00:10", NY, 3) == [
        "2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-02T01:00:00-05:00"]


def test_a_wildcard_schedule_keeps_its_pace_through_the_repeated_hour() -> None:
    """``*/5 * * * *`` (the issue's example) and ``@hourly`` run in both passes of the
    repeated hour (Vixie cron's rule): no hour of silence when clocks go back."""
    assert ticks("0 * * * *", "2026-11-01T00:10", NY, 4) == [
        "2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00",
        "2026-11-01T03:00:00-05:00"]
    assert ticks("@hourly", "2026-11-01T00:10", NY, 2)[1] == "2026-11-01T01:00:00-05:00"
    # Paris, 2026-10-25 03:00 CEST -> 02:00 CET: 5 minutes apart in real time throughout.
    got = ticks("*/5 * * * *", "2026-10-25T01:50", PARIS, 30)
    instants = [datetime.fromisoformat(t).timestamp() for t in got]
    assert [b - a for a, b in itertools.pairwise(instants)] == [300.0] * 29
    assert got[12:14] == ["2026-10-25T02:55:00+02:00", "2026-10-25T02:00:00+01:00"]
    # Asked from inside the second pass of the repeated hour: its next wall time.
    second_pass = datetime(2026, 11, 1, 6, 10, tzinfo=UTC).timestamp()  # 01:10 EST
    nxt = Cron.parse("*/15 * * * *").next_after(second_pass, NY)
    assert datetime.fromtimestamp(nxt, NY).isoformat() == "2026-11-01T01:15:00-05:00"
    # Asked from the end of the first pass: the second pass comes next, not 02:00.
    first_pass_end = datetime(2026, 11, 1, 5, 58, tzinfo=UTC).timestamp()  # 01:58 EDT
    nxt = Cron.parse("*/15 * * * *").next_after(first_pass_end, NY)
    assert datetime.fromtimestamp(nxt, NY).isoformat() == "2026-11-01T01:00:00-05:00"


@pytest.mark.parametrize(("expr", "message"), [
    ("* * * *", "5 fields"),
    ("61 * * * *", "minute: 61 is outside 0-59"),
    ("* 24 * * *", "hour"),
    ("* * 0 * *", "day of month"),
    ("* * * 13 *", "month"),
    ("* * * * 8", "day of week"),
    ("0 0 30 2 *", "never fires"),
    ("@reboot", "unknown cron alias"),
    ("*/0 * * * *", "step"),
    ("5-1 * * * *", "backwards"),
    ("0 0 * foo *", "month: 'foo'"),
    ("*-5 * * * *", "cannot read"),
    ("1,,2 * * * *", "cannot read"),
])
def test_bad_expressions_name_the_field(expr: str, message: str) -> None:
    with pytest.raises(CronError, match=message):
        Cron.parse(expr)
