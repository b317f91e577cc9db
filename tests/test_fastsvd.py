"""The Gram (eigh) truncated factorisation: same factorisation and derivative as svd.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trglab import fastsvd, svd, trg


def _matrix(shape, rank=None, seed=0):
    rng = np.random.default_rng(seed)
    if rank is None:
        return jnp.asarray(rng.standard_normal(shape))
    a = rng.standard_normal((shape[0], rank))
    b = rng.standard_normal((rank, shape[1]))
    return jnp.asarray(a @ b)


def _sign_invariant(factor, k, w):
    """A scalar that does not depend on the signs of singular vector pairs."""
    def f(m):
        u, s, vh = factor(m, k)
        low = (u * jnp.sqrt(s)[None, :]) @ (jnp.sqrt(s)[:, None] * vh)
        return jnp.sum(w * jnp.sin(low)) + jnp.sum(jnp.log(s))
    return f


@pytest.mark.parametrize("shape, k", [((7, 5), 3), ((5, 7), 2), ((6, 6), 6)])
def test_factorisation_matches_svd(shape, k):
    m = _matrix(shape)
    u, s, vh = fastsvd.gram_truncated_svd(m, k)
    u0, s0, vh0 = svd.truncated_svd(m, k)
    np.testing.assert_allclose(s, s0, rtol=1e-12)
    np.testing.assert_allclose((u * s) @ vh, (u0 * s0) @ vh0, atol=1e-12)
    np.testing.assert_allclose(u.T @ u, np.eye(k), atol=1e-12)


@pytest.mark.parametrize("shape, k, rank", [((7, 5), 3, None), ((8, 8), 3, 3), ((8, 8), 2, 4)])
def test_gradient_matches_exact_rule(shape, k, rank):
    """Including a rank-deficient matrix (degenerate zero singular values, as in TRG)."""
    m = _matrix(shape, rank)
    w = _matrix(shape, seed=1)
    g = jax.grad(_sign_invariant(fastsvd.gram_truncated_svd, k, w))(m)
    g0 = jax.grad(_sign_invariant(svd.truncated_svd, k, w))(m)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, g0, rtol=1e-9, atol=1e-10)


def test_second_order_matches_exact_rule():
    m, w, d = _matrix((6, 6)), _matrix((6, 6), seed=1), _matrix((6, 6), seed=2)

    def hvp(factor):
        f = _sign_invariant(factor, 3, w)
        return jax.jvp(jax.grad(f), (m,), (d,))[1]

    np.testing.assert_allclose(hvp(fastsvd.gram_truncated_svd), hvp(svd.truncated_svd), rtol=1e-8, atol=1e-9)


def test_trg_value_and_grad_match_exact_rule():
    ks = trg.schedule(8, 6)
    f = jax.value_and_grad(lambda b: fastsvd.lnz_per_site_gram(b, ks))
    f0 = jax.value_and_grad(lambda b: trg.lnz_per_site(b, ks))
    (v, g), (v0, g0) = f(0.3), f0(0.3)
    assert float(v) == pytest.approx(float(v0), rel=1e-13)
    assert float(g) == pytest.approx(float(g0), rel=1e-11)


def test_bad_k_is_a_clear_error():
    with pytest.raises(ValueError, match="k must be in 1..5"):
        fastsvd.gram_truncated_svd(_matrix((7, 5)), 6)
