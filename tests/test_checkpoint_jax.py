import numpy as np
import pytest

from trglab.experiments import checkpoint_jax as ck
from trglab.grads import value_and_grad
from trglab.ising import site_tensor
from trglab.trg import schedule, step

KS = schedule(16, 6)


def _input_of_step(i):
    """T_i (input of step i, 0-based) at beta = 0.3."""
    t = site_tensor(0.3)
    for k in KS[:i]:
        t, _ = step(t, k)
    return t


def test_step_with_signs_is_a_gauge_transform():
    t = _input_of_step(2)  # (4, 4, 4, 4), k = 4
    k = KS[2]
    ref, ln_ref = step(t, k)
    ones = np.ones(k)
    same, _ = ck.step_with_signs(t, k, ones, ones)
    assert np.array_equal(np.asarray(same), np.asarray(ref))
    d1 = np.array([1.0, -1.0, 1.0, -1.0])
    d2 = np.array([-1.0, -1.0, 1.0, 1.0])
    flipped, ln = ck.step_with_signs(t, k, d1, d2)
    gauge = np.einsum("a,e,c,b->aecb", d1, d2, d1, d2)
    np.testing.assert_allclose(np.asarray(flipped), gauge * np.asarray(ref), rtol=0, atol=1e-15)
    assert float(ln) == float(ln_ref)


def test_sign_mismatch_model_without_flips_is_the_plain_gradient():
    ks = KS[:4]
    g = ck.sign_mismatch_grad(0.3, ks, [None] * len(ks))
    assert abs(g - value_and_grad(0.3, ks, method="staged")[1]) < 1e-13


def test_flips_hurt_except_in_the_last_step():
    ks = KS[:3]
    assert abs(ck.last_step_flip_error(0.3, ks, seed=1)) < 1e-14
    signs = [None, None, None]
    signs[1] = (np.array([1.0, -1.0, 1.0, 1.0]), np.ones(4))
    err = ck.sign_mismatch_grad(0.3, ks, signs) - ck.sign_mismatch_grad(0.3, ks, [None] * 3)
    assert abs(err) > 1e-6


def test_sign_mismatch_grad_rejects_wrong_length():
    with pytest.raises(ValueError, match="one sign pair"):
        ck.sign_mismatch_grad(0.3, KS[:3], [None])


def test_column_signs_detects_flips_and_rotations():
    rng = np.random.default_rng(0)
    a = np.linalg.qr(rng.standard_normal((6, 3)))[0].reshape(2, 3, 3)
    signs, off = ck.column_signs(a, a * np.array([1.0, -1.0, 1.0]))
    assert signs.tolist() == [1, -1, 1] and off < 1e-14
    c, s = np.cos(0.1), np.sin(0.1)
    rot = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])
    _, off = ck.column_signs(a, (a.reshape(6, 3) @ rot).reshape(2, 3, 3))
    assert off == pytest.approx(s, abs=1e-12)


def test_ulps():
    x = np.array([1.0, -0.0, 3.0])
    y = np.array([np.nextafter(1.0, 2.0), 0.0, 3.0])
    assert ck._ulps(x, x) == 0
    assert ck._ulps(x, y) == 1
    assert ck._ulps(np.array([5e-324]), np.array([-5e-324])) == 2


def test_check_checkpoint_stops_at_first_bad_depth():
    plain = lambda b, ks: float(len(ks))
    ckpt = lambda b, ks: float(len(ks)) + (1e-3 if len(ks) >= 3 else 0.0)
    with pytest.raises(ck.CheckpointMismatch, match="at 3 steps"):
        ck.check_checkpoint(plain, ckpt, 0.3, (2, 4, 4, 16))
    assert ck.check_checkpoint(plain, plain, 0.3, (2, 4)) == [0.0, 0.0]


def test_spectrum_at_cut_step5_cuts_on_zeros():
    rows = ck.spectrum_at_cut(0.3, KS[:5])
    assert [r["k"] for r in rows] == [2, 4, 4, 16, 16]
    assert rows[4]["size"] == 256 and rows[4]["zeros"] == 240
    assert rows[4]["s_k1"] < 1e-14 and rows[4]["min_kept_gap"] > 0.01


def test_probe_and_model_reproduce_the_checkpointed_gradient():
    """The mechanism: the probed recomputation's sign flips alone give the checkpointed
    gradient (whatever the flips are on this machine; none -> plain gradient)."""
    ks = KS[:5]
    g, rows = ck.probe_recompute(0.3, ks)
    assert len(rows) == 5 and all(r["recomputed"] for r in rows)
    assert all(r["offdiag"] < 1e-10 for r in rows)  # pure sign changes, no rotations
    model = ck.sign_mismatch_grad(0.3, ks, ck.signs_from_probe(rows))
    assert abs(model - g) < 1e-12
    plain = value_and_grad(0.3, ks, method="whole")[1]
    if any(r["flips1"] + r["flips2"] for r in rows[:-1]):
        assert abs(g - plain) > 1e-8
    else:
        assert abs(g - plain) < 1e-13


def test_sign_fixed_step_survives_checkpointing():
    ks = KS[:5]
    plain = value_and_grad(0.3, ks, method="whole")[1]
    assert abs(ck.grad_sign_fixed(0.3, ks, ckpt=True) - plain) < 1e-13
