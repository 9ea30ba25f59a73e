"""One vocabulary: a Plan's phases, and which of them count as finished or ended."""

from planops.api.names import Phase, ended, finished


def test_a_phase_is_finished_when_nothing_more_happens_by_itself_and_ended_when_it_stands():
    # an Invalid Plan runs nothing: `submit --wait` stops, a schedule does not count it active
    assert [p for p in Phase if finished(p)] == [Phase.SUCCEEDED, Phase.FAILED, Phase.INVALID]
    # ... but it is judged again when its Capsule appears: the reconciler does not close it
    assert [p for p in Phase if ended(p)] == [Phase.SUCCEEDED, Phase.FAILED]
    assert finished("Invalid") and not ended("Invalid") and not finished(None)
