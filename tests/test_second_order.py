import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from trglab import second_order as so
from trglab.grads import value_and_grad
from trglab.svd import truncated_svd
from trglab.trg import lnz_per_site, schedule

KS5 = schedule(16, 5)  # (2, 4, 4, 16, 16): step 5 truncates 256 singular values to 16
RECORDED_GRAD_5 = 0.744793433247367  # seed 000, JAX grad at beta = 0.3, chi = 16, 5 steps


def _well_conditioned(rows=5, cols=4, seed=0):
    """A (rows, cols) matrix with singular values 4, 3, 2, 1 (distinct, well separated)."""
    rng = np.random.default_rng(seed)
    q1, _ = np.linalg.qr(rng.standard_normal((rows, rows)))
    q2, _ = np.linalg.qr(rng.standard_normal((cols, cols)))
    s = np.zeros((rows, cols))
    s[np.arange(cols), np.arange(cols)] = [4.0, 3.0, 2.0, 1.0]
    return jnp.asarray(q1 @ s @ q2.T)


def _sign_free(m, k):
    """Outputs of the truncated SVD that do not depend on the signs of the singular vectors."""
    u, s, vh = truncated_svd(m, k)
    return s, (u * s[None, :]) @ vh, u @ u.T, vh.T @ vh


@pytest.mark.parametrize("shape", [(5, 4), (4, 5), (4, 4)])
def test_svd_rule_check_grads_order_2(shape):
    m = _well_conditioned(*shape) if shape[0] >= shape[1] else _well_conditioned(*shape[::-1]).T
    check_grads(lambda x: _sign_free(x, 2), (m,), order=2, modes=("fwd", "rev"), eps=1e-5, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("method", so.METHODS)
def test_first_derivative_equals_plain_gradient(method):
    d = so.derivatives(0.3, KS5, method)
    lnz, g = value_and_grad(0.3, KS5, method="whole")
    assert abs(d["lnz"] - lnz) < 1e-14
    assert abs(d["grad"] - g) < 1e-13
    assert abs(d["grad"] - RECORDED_GRAD_5) < 1e-13
    assert d["u"] == -d["grad"]


@pytest.mark.parametrize("method", so.METHODS)
def test_c_by_ad_equals_central_difference(method):
    c_ad = so.specific_heat_ad(0.3, KS5, method)
    c_fd = so.central_difference(0.3, KS5, h=1e-5)
    assert math.isfinite(c_ad)
    assert abs(c_ad - c_fd) < 1e-6
    assert abs(c_ad - 0.3**2 * so.derivatives(0.3, KS5, method)["g2"]) < 1e-15


def test_methods_agree_with_each_other():
    cs = [so.specific_heat_ad(0.3, KS5, m) for m in so.METHODS]
    assert max(cs) - min(cs) < 1e-11


def test_plain_grad_of_grad_is_not_nan():
    f = jax.jit(jax.grad(jax.grad(lambda b: lnz_per_site(b, KS5))))
    assert math.isfinite(float(f(jnp.asarray(0.3))))


def test_lnz_by_depth_matches_prefix_runs():
    ks = KS5
    v = so.lnz_by_depth(jnp.asarray(0.3), ks)
    assert v.shape == (len(ks),)
    for n in range(1, len(ks) + 1):
        assert abs(float(v[n - 1]) - float(lnz_per_site(jnp.asarray(0.3), ks[:n]))) < 1e-14
    d = so.derivatives_by_depth(0.3, ks)
    assert d["steps"] == [1, 2, 3, 4, 5]
    assert abs(d["u"][-1] + RECORDED_GRAD_5) < 1e-13
    assert abs(d["c"][-1] - so.specific_heat_ad(0.3, ks)) < 1e-10


def test_cost_rows():
    rows = so.cost(0.3, (2, 4), repeat=1)
    assert [r["method"] for r in rows] == list(so.METHODS) + ["central"]
    for r in rows:
        assert r["compile_s"] > 0 and r["run_s"] > 0
        assert r["temp_mb"] is None or r["temp_mb"] >= 0
    cs = [r["c"] for r in rows]
    assert max(cs) - min(cs) < 1e-6


def test_bad_input():
    with pytest.raises(ValueError, match="unknown second-order method"):
        so.derivatives(0.3, KS5, "sideways")
    with pytest.raises(ValueError, match="beta must be a positive"):
        so.derivatives(-0.3, KS5)
    with pytest.raises(ValueError, match="schedule"):
        so.derivatives(0.3, (2, 99))
    with pytest.raises(ValueError, match="0 < h < beta"):
        so.central_difference(0.3, KS5, h=0.5)


KS4_5 = schedule(4, 5)  # (2, 4, 4, 4, 4): steps 2..4 repeat, so the scan form has a tail


def test_ks4_5_has_a_scan_tail():
    from trglab.scan import split_schedule

    assert split_schedule(KS4_5)[0] < len(KS4_5) - 1


@pytest.mark.parametrize("method", ["fwd_rev"])  # the page's method; the others agree with it
def test_scan_form_equals_unrolled_form(method):
    a = so.derivatives(0.42, KS4_5, method, form="scan")
    b = so.derivatives(0.42, KS4_5, method, form="unrolled")
    assert a["lnz"] == pytest.approx(b["lnz"], rel=1e-14)
    assert a["grad"] == pytest.approx(b["grad"], rel=1e-12)
    assert a["c"] == pytest.approx(b["c"], rel=1e-9)


def test_lnz_by_depth_scan_tail_matches_prefix_runs():
    v = so.lnz_by_depth(jnp.asarray(0.42), KS4_5)
    assert v.shape == (len(KS4_5),)
    for n in range(1, len(KS4_5) + 1):
        assert abs(float(v[n - 1]) - float(lnz_per_site(jnp.asarray(0.42), KS4_5[:n]))) < 1e-14


def test_by_depth_reuse_returns_the_stored_point(monkeypatch):
    d1 = so.derivatives_by_depth(0.41, KS4_5, reuse=False)
    calls = []
    real = so._by_depth_jitted
    monkeypatch.setattr(so, "_by_depth_jitted", lambda ks: calls.append(ks) or real(ks))
    d2 = so.derivatives_by_depth(0.41, KS4_5)  # reused: the program is not run
    assert calls == [] and d2 == d1
    d3 = so.derivatives_by_depth(0.41, KS4_5, reuse=False)  # run again
    assert calls == [KS4_5] and d3 == d1
    d2["c"][0] = 99.0  # the caller's copy, not the stored one
    assert so.derivatives_by_depth(0.41, KS4_5)["c"][0] == d1["c"][0]


def test_bad_form():
    with pytest.raises(ValueError, match="unknown form"):
        so.derivatives(0.3, KS5, form="rolled")
    with pytest.raises(ValueError, match="unknown form"):
        so.cost(0.3, (2, 4), form="rolled")
