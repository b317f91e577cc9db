"""The ValueKey model: naive equality doubles per chain layer; interned/memoized is linear."""

import pytest

from trglab.models.valuekey import KeyModel, MODES, naive_comparisons, transform, transform_table


def test_naive_chain_doubles_per_layer():
    counts = [transform("chain", n, "naive").op_comparisons for n in range(8, 13)]
    ratios = [b / a for a, b in zip(counts, counts[1:])]
    assert all(1.99 < r < 2.05 for r in ratios), ratios


@pytest.mark.parametrize("program,depths", [("chain", [3, 6, 9]), ("trg", [1, 2])])
def test_prediction_equals_measured_naive(program, depths):
    for d in depths:
        assert transform(program, d, "naive").op_comparisons == naive_comparisons(program, d)


def test_trg_like_step_grows_24_per_step():
    counts = [naive_comparisons("trg", s) for s in range(2, 6)]
    ratios = [b / a for a, b in zip(counts, counts[1:])]
    assert all(23.5 < r < 24.5 for r in ratios), ratios


def test_interned_is_pointer_check_and_memoized_is_linear():
    for n in (5, 10, 20):
        assert transform("chain", n, "interned").op_comparisons == 0
        assert transform("chain", n, "memoized").op_comparisons == 2 * n
    memo = [transform("trg", s, "memoized").op_comparisons for s in (2, 3, 4)]
    assert memo[2] - memo[1] == memo[1] - memo[0]  # constant work per added step


def test_keys_equal_structurally_and_differ_on_structure():
    model = KeyModel("naive")
    a, b = model.builder(), model.builder()
    x, y = a.input("x"), b.input("x")
    ka, kb = a.op("mul", [x, x]), b.op("mul", [y, y])
    assert ka is not kb and ka == kb and hash(ka) == hash(kb)
    assert a.op("add", [x, x]) != kb
    u1, s1 = a.op("svd", [x], n_out=2)
    u2, s2 = b.op("svd", [y], n_out=2)
    assert u1 == u2 and s1 == s2 and u1 != s2


def test_table_has_every_mode():
    rows = transform_table("chain", [3, 4])
    assert [r["depth"] for r in rows] == [3, 4]
    for mode in MODES:
        assert f"{mode}_comparisons" in rows[0] and f"{mode}_ms" in rows[0]


def test_bad_input_one_line():
    with pytest.raises(ValueError, match="unknown key mode"):
        transform("chain", 3, "fast")
    with pytest.raises(ValueError, match="unknown program"):
        transform("loop", 3)
    with pytest.raises(ValueError, match="depth must be an int >= 1"):
        transform("chain", 0)


def test_cap_stops_deeper_runs():
    rows = transform_table("chain", [3, 4, 5], modes=("naive",), cap_s=0.0)
    assert rows[0]["naive_comparisons"] is not None
    assert rows[1]["naive_comparisons"] is None and rows[2]["naive_ms"] is None
