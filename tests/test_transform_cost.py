import pytest

from trglab.experiments import transform_cost as tc


def test_profile_puts_the_time_in_key_equality():
    res, rows, share = tc.profile_transform("chain", 10, "naive")
    assert res.op_comparisons == 8134
    assert share > 0.8
    assert rows and rows[0]["function"].split(" ")[0] in tc.EQ_FUNCTIONS + ("<genexpr>",)
    _, _, share_interned = tc.profile_transform("chain", 10, "interned")
    assert share_interned < 0.5  # interned keys never reach __eq__


def test_comparison_rows_double_per_layer_in_the_chain():
    rows = tc.comparison_rows("chain", [6, 8, 10])
    assert [r["naive_comparisons"] for r in rows] == [r["naive_predicted"] for r in rows]
    assert all(1.9 < r["naive_ratio"] < 2.2 for r in rows[1:])
    assert rows[0]["naive_ratio"] is None
    assert [r["interned_comparisons"] for r in rows] == [0, 0, 0]
    assert [r["memoized_comparisons"] for r in rows] == [12, 16, 20]


def test_trg_program_grows_24_fold():
    rows = tc.comparison_rows("trg", [1, 2])
    assert 23 < rows[1]["naive_ratio"] < 27


def test_fix_cost_rows_and_verdicts():
    rows = tc.fix_cost_rows("chain", [6])
    assert set(rows[0]) >= {"depth", "naive_build_ms", "interned_lookup_ms", "memoized_lookup_ms"}
    v = tc.depth_verdicts("chain", [6, 8, 10])
    assert v["naive"].verdict == "exponential" and v["memoized"].verdict == "ok"
    with pytest.raises(ValueError, match="cost must be"):
        tc.depth_verdicts("chain", [6, 8, 10], cost="bytes")


def test_bad_program_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown program"):
        tc.comparison_rows("nope", [1, 2])
