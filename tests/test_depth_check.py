"""depth_check: flags doubling per step, passes linear growth, robust to one outlier."""

import pytest

from trglab.depth_check import EXPONENTIAL, OK, depth_check, step_ratios, verdict_from_ratios


def test_doubling_is_flagged():
    r = depth_check(lambda d: 3.0 * 2.0**d, range(1, 8), repeat=1, floor=0)
    assert r.verdict == EXPONENTIAL and r.median_tail == pytest.approx(2.0)


def test_linear_passes():
    r = depth_check(lambda d: 0.05 + 0.02 * d, range(1, 8), repeat=1)
    assert r.verdict == OK and r.median_tail < 1.5


def test_one_outlier_does_not_change_the_verdict():
    lin = {d: 0.01 * d for d in range(1, 9)}
    lin[7] *= 5  # one slow run
    assert depth_check(lin.__getitem__, range(1, 9), repeat=1).verdict == OK
    exp = {d: 1e-3 * 2.0**d for d in range(1, 9)}
    exp[7] /= 3  # one fast measurement
    assert depth_check(exp.__getitem__, range(1, 9), repeat=1).verdict == EXPONENTIAL


def test_min_of_repeats_is_used():
    calls = iter([5.0, 1.0, 2.0])  # min 1.0 at depth 1
    r = depth_check(lambda d: next(calls) if d == 1 else float(d), [1, 2, 3], repeat=3)
    assert r.costs[0] == 1.0


def test_non_consecutive_depths_give_per_step_ratios():
    assert step_ratios([2, 4, 6], [1.0, 4.0, 16.0]) == pytest.approx([2.0, 2.0])


def test_too_small_to_tell_is_ok_with_note():
    verdict, med, note = verdict_from_ratios([None, None, 3.0])
    assert verdict == OK and med is None and "too small" in note


def test_bad_input():
    with pytest.raises(ValueError, match="at least 3 depths"):
        depth_check(float, [1, 2])
    with pytest.raises(ValueError, match="depths must increase"):
        step_ratios([2, 1], [1.0, 2.0])
    with pytest.raises(ValueError, match="depths must be ints"):
        depth_check(float, [1, 2, 2.5])
