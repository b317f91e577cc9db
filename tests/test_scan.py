"""The scan form of ln Z / N: same value and gradient as the unrolled whole graph."""

import jax
import jax.numpy as jnp
import pytest

from trglab import scan, trg


@pytest.mark.parametrize(
    "ks, expected",
    [
        ((2, 4, 4, 16, 16, 16), (4, 16)),
        ((2, 4, 4, 16, 16), (5, 16)),  # one repeated step only: nothing to scan
        ((2, 4, 4, 8, 8, 8, 8), (4, 8)),
        ((2, 2, 2), (0, 2)),  # input dim 2 = k from the first step on
        ((2, 4), (2, 4)),
    ],
)
def test_split_schedule(ks, expected):
    assert scan.split_schedule(ks) == expected


def test_split_schedule_chi16_starts_at_step_5():
    start, k = scan.split_schedule(trg.schedule(16, 6))
    assert (start, k) == (4, 16)  # index 4 = step 5


def test_tail_weights_are_exact_powers_of_two():
    w = scan.tail_weights(4, 7)
    assert w.dtype == jnp.float64
    assert [float(x) for x in w] == [2.0**-4, 2.0**-5, 2.0**-6]


@pytest.mark.parametrize("chi, steps", [(8, 8), (16, 6)])
def test_scan_matches_whole_graph(chi, steps):
    ks = trg.schedule(chi, steps)
    assert scan.split_schedule(ks)[0] < steps - 1  # the scan path is really taken
    whole = jax.jit(jax.value_and_grad(lambda b: trg.lnz_per_site(b, ks)))(0.3)
    v, g = scan.value_and_grad_scan(0.3, ks)
    assert v == pytest.approx(float(whole[0]), rel=1e-13, abs=0)
    assert g == pytest.approx(float(whole[1]), rel=1e-13, abs=0)


def test_scan_unjitted_agrees():
    ks = trg.schedule(8, 6)
    ref = scan.value_and_grad_scan(0.3, ks)
    assert scan.value_and_grad_scan(0.3, ks, jit=False) == pytest.approx(ref, rel=1e-13)


def test_scan_remat_same_value_gradient_close():
    """remat recomputes the body in the backward pass; like jax.checkpoint per step
    (see the checkpoint_jax page) the gradient moves in the 6th-7th digit, the value not."""
    ks = trg.schedule(8, 7)
    v, g = scan.value_and_grad_scan(0.3, ks)
    vr, gr = scan.value_and_grad_scan(0.3, ks, remat=True)
    assert vr == pytest.approx(v, rel=1e-13)
    assert gr == pytest.approx(g, rel=1e-5)


def test_scan_forward_value_matches():
    ks = trg.schedule(8, 8)
    assert float(scan.lnz_scan_fn(ks)(0.3)) == pytest.approx(float(trg.lnz_per_site(0.3, ks)), rel=1e-13)


def test_bad_schedule_is_a_clear_error():
    with pytest.raises(ValueError, match="schedule entry 1"):
        scan.value_and_grad_scan(0.3, (2, 0, 4))
    with pytest.raises(ValueError, match="empty"):
        scan.split_schedule(())
