import jax
import pytest

from trglab.models import checkpoint_chain as cc


def _chain(tracer, n):
    """A value whose chain has n nodes (n checkpoints in a row)."""
    v = tracer.leaf()
    for _ in range(n):
        v = tracer.checkpoint(v)
    return v


def test_concat_merge_copies_lhs_onto_shared_rhs():
    tr = cc.Tracer("concat")
    a, b = _chain(tr, 3), _chain(tr, 2)
    (out,) = tr.apply([a, b])
    nodes = list(cc.iter_chain(out.chain))
    assert [n.origin for n in nodes] == [3, 2, 1, 5, 4]
    assert nodes[3] is b.chain  # rhs kept by reference, like Some(rhs_head)
    assert all(x is not y for x, y in zip(nodes[:3], cc.iter_chain(a.chain)))  # lhs copied
    assert tr.copied == 3


def test_concat_does_not_deduplicate_but_union_does():
    for merge, expected in (("concat", 6), ("union", 3)):
        tr = cc.Tracer(merge)
        a = _chain(tr, 3)
        (out,) = tr.apply([a, a])
        assert cc.chain_length(out.chain) == expected
        assert cc.distinct_graphs(out.chain) == 3


def test_fanout_24_reproduces_recorded_tenferro_chain():
    rows = cc.tenferro_trg_chain(5)
    assert tuple(r["chain_nodes"] for r in rows) == cc.RECORDED_CHAIN == (1, 25, 601, 14425, 346201)
    assert [r["distinct_graphs"] for r in rows] == [1, 2, 3, 4, 5]


def test_other_fanout_gives_other_chain():
    assert [r["chain_nodes"] for r in cc.tenferro_trg_chain(4, uses=3)] == [1, 4, 13, 40]


def test_union_merge_is_linear():
    assert [r["chain_nodes"] for r in cc.tenferro_trg_chain(5, merge="union")] == [1, 2, 3, 4, 5]
    assert [r["chain_nodes"] for r in cc.jax_trg_chain((2, 4, 4, 16, 16), merge="union")] == [1, 2, 3, 4, 5]


def test_replay_of_this_books_jax_step_gives_recorded_chain():
    rows = cc.jax_trg_chain((2, 4, 4, 16, 16))
    assert tuple(r["chain_nodes"] for r in rows) == cc.RECORDED_CHAIN


def test_square_chain_is_two_to_the_n_minus_one():
    assert cc.square_chain(20) == [2**i - 1 for i in range(1, 21)]
    assert cc.square_chain(8, merge="union") == list(range(1, 9))


def test_path_counts_on_small_jaxpr():
    jx = jax.make_jaxpr(lambda x: (x * x + x, 2.0 * x, jax.numpy.sin(x)))(1.0)
    assert cc.path_counts(jx) == [3, 1, 1]
    assert cc.path_counts(jx, [5]) == [15, 5, 5]


def test_path_counts_enter_jit_calls():
    inner = jax.jit(lambda y: y * y)
    jx = jax.make_jaxpr(lambda x: inner(x) * x)(1.0)
    assert cc.path_counts(jx) == [3]


def test_step_path_counts_of_this_books_trg_step():
    assert cc.step_path_counts(16, 16) == {"T_next": 24, "ln_n": 2}
    assert cc.step_path_counts(2, 2) == {"T_next": 24, "ln_n": 2}


def test_predicted_lengths():
    assert tuple(cc.predicted_lengths(24, 5)) == cc.RECORDED_CHAIN
    assert cc.predicted_lengths(2, 6) == [1, 3, 7, 15, 31, 63]
    with pytest.raises(ValueError):
        cc.predicted_lengths(0, 3)


def test_chain_check_verdicts():
    rows = cc.chain_check(list(cc.RECORDED_CHAIN))
    assert [r["verdict"] for r in rows] == ["ok", "duplicated", "duplicated", "duplicated", "overflow risk"]
    assert rows[-1]["growth"] == pytest.approx(24.0, rel=1e-3)
    assert cc.chain_verdict([1, 2, 3, 4]).startswith("ok")
    assert cc.chain_verdict(list(cc.RECORDED_CHAIN)).startswith("overflow risk: 346201 nodes after 5")
    assert cc.chain_verdict([1, 25, 601]).startswith("duplicated: 25 nodes after 2")


@pytest.mark.parametrize("bad", [[], [1, -2], [1, 2.5]])
def test_chain_check_rejects_bad_input(bad):
    with pytest.raises(ValueError):
        cc.chain_check(bad)


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown merge"):
        cc.Tracer("dedup")
    with pytest.raises(ValueError, match="uses"):
        cc.fanout_step(cc.Tracer(), cc.Value(), 0)
    with pytest.raises(ValueError, match="steps"):
        cc.tenferro_trg_chain(0)


def test_path_table_ends_with_step_path_count():
    rows = cc.path_table(cc.step_jaxpr(2, 2))
    assert rows[0]["primitive"] == "mul" and rows[0]["paths"] == 2  # T * T
    assert max(r["paths"] for r in rows) == 24
    with pytest.raises(ValueError):
        cc.path_table(jax.make_jaxpr(lambda a, b: a + b)(1.0, 2.0))
