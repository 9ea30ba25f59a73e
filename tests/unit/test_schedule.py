"""CronJob's rules for scheduled plans, as a pure function of (spec, history, now): no real
minutes are waited; the clock is the `now` argument."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from planops.engine.schedule import ScheduleSpec, check, decide, run_name

T0 = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def d(schedule="*/5 * * * *", *, last=None, now=T0, active=0, created=T0, **kw):
    return decide(
        ScheduleSpec(schedule, **kw),
        name="nightly",
        created=created,
        last_scheduled=last,
        now=now,
        active=active,
    )


def test_nothing_is_due_before_the_first_schedule_time():
    r = d(now=at(4))
    assert r.run_at is None and r.missed == 0 and r.next_at == at(5)


def test_a_due_time_starts_one_run_with_a_deterministic_name():
    r = d(now=at(5.5))
    assert r.run_at == at(5)
    assert r.run_name == run_name("nightly", at(5)) == f"nightly-{int(at(5).timestamp()) // 60}"
    assert r.next_at == at(10)


def test_a_time_already_scheduled_is_not_started_again():
    assert d(last=at(5), now=at(9)).run_at is None


def test_only_the_most_recent_due_time_starts_and_the_others_are_missed():
    r = d(last=at(5), now=at(31))  # 10, 15, 20, 25, 30 were due
    assert r.run_at == at(30) and r.missed == 4


def test_more_than_100_missed_times_are_reported_and_the_most_recent_still_starts():
    r = d("* * * * *", last=at(0), now=at(60 * 24 * 365))
    assert r.too_many_missed and r.run_at == at(60 * 24 * 365)


def test_starting_deadline_makes_a_late_time_missed_not_started():
    r = d(last=at(5), now=at(12), starting_deadline_seconds=60)  # 10 is 2 min old
    assert r.run_at is None and r.missed == 1
    r = d(last=at(5), now=at(10.5), starting_deadline_seconds=60)
    assert r.run_at == at(10)


def test_forbid_skips_while_a_run_is_active_and_starts_when_it_ended():
    r = d(last=at(5), now=at(10.5), concurrency_policy="Forbid", active=1)
    assert r.run_at is None and r.skipped_by_policy and r.missed == 0
    r = d(last=at(5), now=at(11), concurrency_policy="Forbid", active=0)
    assert r.run_at == at(10)


def test_replace_stops_the_active_run_and_allow_does_not():
    assert d(now=at(5), concurrency_policy="Replace", active=1).replace is True
    r = d(now=at(5), concurrency_policy="Allow", active=2)
    assert r.run_at == at(5) and r.replace is False


def test_suspend_starts_nothing_and_counts_the_time_missed():
    r = d(now=at(5.5), suspend=True)
    assert r.run_at is None and r.missed == 1


def test_macros():
    assert d("@hourly", now=at(61)).run_at == at(60)
    assert d("@daily", now=T0 + timedelta(days=1, minutes=1)).run_at == datetime(
        2026, 1, 11, tzinfo=UTC
    )


def test_time_zone_winter_and_summer():
    winter = d("0 9 * * *", now=datetime(2026, 1, 11, 9, 0, tzinfo=UTC), time_zone="Europe/Berlin")
    assert winter.run_at == datetime(2026, 1, 11, 8, 0, tzinfo=UTC)
    created = datetime(2026, 7, 1, tzinfo=UTC)
    summer = d(
        "0 9 * * *",
        created=created,
        now=datetime(2026, 7, 1, 8, 0, tzinfo=UTC),
        time_zone="Europe/Berlin",
    )
    assert summer.run_at == datetime(2026, 7, 1, 7, 0, tzinfo=UTC)


def test_dst_spring_forward_a_time_in_the_gap_runs_at_the_first_instant_after_it():
    created = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    r = d(
        "30 2 * * *",
        created=created,
        now=datetime(2026, 3, 29, 1, 30, tzinfo=UTC),
        time_zone="Europe/Berlin",
    )  # 02:30 does not exist on 2026-03-29 in Berlin
    assert r.run_at == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # 03:00 CEST


def test_dst_fall_back_a_repeated_hour_runs_once_per_distinct_instant():
    created = datetime(2026, 10, 24, 12, 0, tzinfo=UTC)
    zone = "Europe/Berlin"
    # a daily time inside the repeated hour runs once that day
    first = d(
        "30 2 * * *", created=created, now=datetime(2026, 10, 25, 0, 31, tzinfo=UTC), time_zone=zone
    )
    assert first.run_at == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST
    again = d(
        "30 2 * * *",
        created=created,
        last=first.run_at,
        now=datetime(2026, 10, 25, 3, 0, tzinfo=UTC),
        time_zone=zone,
    )  # past 02:30 CET
    assert again.run_at is None and again.missed == 0
    # @hourly fires at both 02:00s (two distinct instants, two distinct run names)
    first = d(
        "@hourly",
        created=datetime(2026, 10, 24, 23, 30, tzinfo=UTC),
        now=datetime(2026, 10, 25, 0, 0, 30, tzinfo=UTC),
        time_zone=zone,
    )
    second = d(
        "@hourly",
        created=datetime(2026, 10, 24, 23, 30, tzinfo=UTC),
        last=first.run_at,
        now=datetime(2026, 10, 25, 1, 0, 30, tzinfo=UTC),
        time_zone=zone,
    )
    assert first.run_at == datetime(2026, 10, 25, 0, 0, tzinfo=UTC)
    assert second.run_at == datetime(2026, 10, 25, 1, 0, tzinfo=UTC)
    assert first.run_name != second.run_name


def test_check_reports_bad_schedules_and_zones():
    assert check(ScheduleSpec("*/5 * * * *", "Europe/Berlin")) == []
    ((field, message),) = check(ScheduleSpec("61 * * * *"))
    assert field == "schedule" and "not a cron expression" in message
    ((field, message),) = check(ScheduleSpec("@daily", "Mars/Olympus"))
    assert field == "timeZone" and "IANA" in message
