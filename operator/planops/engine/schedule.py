"""When a scheduled plan runs: CronJob's rules as a pure function of (spec, history, now).

Cron parsing and time arithmetic are croniter's (standard 5-field syntax and the @hourly-style
macros, IANA time zones with DST). The rules, as Kubernetes' CronJob controller (v2) has them:

- The due times are the schedule's times after the last scheduled time (or the creation time)
  up to now. Only the most recent one is started; the others are *missed* (reported, never
  silent). More than 100 missed times is reported as such (CronJob's TooManyMissedTimes).
- startingDeadlineSeconds: a due time older than now - deadline is missed, not started late.
- concurrencyPolicy: Allow starts regardless; Forbid skips while a run is active (the time stays
  due, so it starts when the active run ends if still within the deadline); Replace stops the
  active runs and starts the new one.
- suspend: nothing starts; due times pass (and are missed when the suspension ends, as CronJob).

Run names are deterministic per scheduled time (`<name>-<minutes since the epoch>`), so two
replicas or a restarted operator can never create two runs for one time.

DST (documented in docs/schedules.md and tested): a time that does not exist on the day clocks
go forward runs at the first instant after the gap (croniter's rule). When clocks go back and an
hour happens twice, a schedule that names its hours (`30 2 * * *`, `@daily`) runs once, at the
first of the two instants: croniter alone would fire it twice, the double run users of other
tools complain about. A schedule whose hour field is `*` (`@hourly`, `*/15 * * * *`) is about
elapsed time and fires in both real hours.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

if TYPE_CHECKING:
    from croniter import croniter

Policy = Literal["Allow", "Forbid", "Replace"]
TOO_MANY_MISSED = 100


@dataclass(frozen=True)
class ScheduleSpec:
    schedule: str
    time_zone: str | None = None
    starting_deadline_seconds: int | None = None
    concurrency_policy: Policy = "Allow"
    suspend: bool = False


@dataclass(frozen=True)
class ScheduleDecision:
    run_at: datetime | None  # the scheduled time to start now, or None
    run_name: str | None
    replace: bool  # stop the active runs first (Replace)
    skipped_by_policy: bool  # a time was due but Forbid kept it waiting
    missed: int  # due times that will never run (older ones, past the deadline); capped at 101
    too_many_missed: bool
    next_at: datetime  # the next schedule time after now (when to look again)


def _cron() -> type[croniter]:
    """croniter (and dateutil under it), imported by the first schedule that needs it: an
    operator with no ScheduledPlan never loads them (~1.3 MiB of its memory)."""
    from croniter import croniter  # noqa: PLC0415

    return croniter


def check(spec: ScheduleSpec) -> list[tuple[str, str]]:
    """Problems of the schedule itself, as (field, message); empty when usable."""
    problems = []
    if not _cron().is_valid(spec.schedule):
        problems.append(
            (
                "schedule",
                f"schedule {spec.schedule!r} is not a cron expression (5 "
                "fields, or @yearly @monthly @weekly @daily @hourly)",
            )
        )
    try:
        _zone(spec.time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        problems.append(
            (
                "timeZone",
                f"timeZone {spec.time_zone!r} is not an IANA time zone (e.g. Europe/Berlin)",
            )
        )
    return problems


def _zone(name: str | None) -> ZoneInfo:
    return ZoneInfo(name or "UTC")


def run_name(name: str, at: datetime) -> str:
    """At most 61 characters (a label value, a Job name part); a cut never ends in `.` or `-`
    (`a.-1234` is no object name)."""
    return f"{name[:52].rstrip('.-')}-{int(at.timestamp()) // 60}"


def _names_hours(schedule: str) -> bool:
    """Does the schedule fire at specific hours (not `*` in the hour field)?"""
    macros = {
        "@hourly": False,
        "@daily": True,
        "@midnight": True,
        "@weekly": True,
        "@monthly": True,
        "@yearly": True,
        "@annually": True,
    }
    if schedule.strip() in macros:
        return macros[schedule.strip()]
    fields = schedule.split()
    return len(fields) >= 2 and fields[1] != "*"


def _times_after(
    spec: ScheduleSpec, start: datetime, until: datetime, limit: int
) -> list[datetime]:
    local_start = start.astimezone(_zone(spec.time_zone))
    it = _cron()(spec.schedule, local_start)
    once_per_wall_time = _names_hours(spec.schedule)
    out: list[datetime] = []
    # the last scheduled time's wall clock: its repeat an hour later is the same time again
    previous_wall: datetime | None = local_start.replace(tzinfo=None)
    while len(out) < limit:
        t = it.get_next(datetime)
        # compare instants in UTC: two datetimes of one zone compare by wall time, ignoring fold
        if t.astimezone(UTC) > until.astimezone(UTC):
            break
        wall = t.replace(tzinfo=None)
        if once_per_wall_time and wall == previous_wall:
            continue  # the same wall-clock time again, in the hour that repeats when clocks go back
        previous_wall = wall
        out.append(t)
    return out


def decide(
    spec: ScheduleSpec,
    *,
    name: str,
    created: datetime,
    last_scheduled: datetime | None,
    now: datetime,
    active: int,
) -> ScheduleDecision:
    """What to do at `now` (all datetimes timezone-aware)."""
    zone = _zone(spec.time_zone)
    local_now = now.astimezone(zone)
    next_at = _cron()(spec.schedule, local_now).get_next(datetime)
    earliest = last_scheduled or created
    due = _times_after(spec, earliest, local_now, TOO_MANY_MISSED + 2)
    if not due:
        return ScheduleDecision(None, None, False, False, 0, False, next_at)
    # the most recent due time: the last one found, or (when many were missed) the one before now
    most_recent = (
        due[-1]
        if len(due) <= TOO_MANY_MISSED + 1
        else _cron()(spec.schedule, local_now + timedelta(microseconds=1)).get_prev(datetime)
    )
    too_many = len(due) > TOO_MANY_MISSED
    deadline = spec.starting_deadline_seconds
    in_time = deadline is None or most_recent >= now - timedelta(seconds=deadline)
    older = len(due) - 1
    if spec.suspend or not in_time:
        return ScheduleDecision(None, None, False, False, older + 1, too_many, next_at)
    if spec.concurrency_policy == "Forbid" and active:
        return ScheduleDecision(None, None, False, True, older, too_many, next_at)
    return ScheduleDecision(
        most_recent.astimezone(UTC),
        run_name(name, most_recent),
        spec.concurrency_policy == "Replace" and active > 0,
        False,
        older,
        too_many,
        next_at,
    )
