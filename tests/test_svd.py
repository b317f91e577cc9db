import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from trglab.svd import DEGENERATE_TOL, numerical_rank, svd_full, truncated_svd


def _matrix(m=6, n=6, seed=0, spread=True):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, n))
    if spread:  # well separated singular values
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        s = np.linspace(3.0, 0.5, min(m, n))
        a = (u * s) @ vh
    return jnp.asarray(a)


def _invariant(m, k=3):
    # gauge-invariant functions of the truncated factors
    u, s, vh = truncated_svd(m, k)
    return jnp.sum(jnp.sin(s)) + jnp.sum(((u * s) @ vh) ** 2 * jnp.cos(m))


def test_values_match_numpy():
    m = _matrix()
    u, s, vh = svd_full(m)
    np.testing.assert_allclose(np.asarray((u * s) @ vh), np.asarray(m), atol=1e-13)
    np.testing.assert_allclose(np.asarray(s), np.linalg.svd(np.asarray(m), compute_uv=False), atol=1e-13)


@pytest.mark.parametrize("shape", [(6, 6), (7, 5), (5, 7)])
def test_first_and_second_order_derivatives(shape):
    m = _matrix(*shape, seed=1)
    f = lambda x: _invariant(x, 3)
    check_grads(f, (m,), order=1, modes=("fwd", "rev"), atol=1e-7, rtol=1e-7)
    # second order: finite differences of derivatives carry ~1e-6 relative noise
    check_grads(f, (m,), order=2, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)


def test_truncation_on_rank_deficient_matrix_is_finite_and_exact():
    # rank-2 matrix with 4 exactly degenerate zero singular values: built-in rule gives NaN
    rng = np.random.default_rng(2)
    a = jnp.asarray(rng.standard_normal((6, 2)) @ rng.standard_normal((2, 6)))
    f = lambda x: jnp.sum(truncated_svd(x, 2)[1] ** 2)  # = ||x||_F^2 for a rank-2 x
    g = jax.grad(f)(a)
    assert np.all(np.isfinite(np.asarray(g)))
    np.testing.assert_allclose(np.asarray(g), 2 * np.asarray(a), atol=1e-12)


def test_second_derivative_on_rank_deficient_input_is_finite():
    rng = np.random.default_rng(3)
    a = jnp.asarray(rng.standard_normal((5, 2)) @ rng.standard_normal((2, 5)))
    d = jnp.asarray(rng.standard_normal((5, 5)))
    f = lambda t: jnp.sum(jnp.log(truncated_svd(a + t * d, 2)[1]))
    h = jax.grad(jax.grad(f))(0.0)
    eps = 1e-4
    fd = (jax.grad(f)(eps) - jax.grad(f)(-eps)) / (2 * eps)
    assert np.isfinite(h) and abs(h - fd) < 1e-6


def test_numerical_rank():
    assert numerical_rank([1.0, 0.5, 1e-13, 0.0]) == 2
    assert numerical_rank([0.0, 0.0]) == 0
    assert DEGENERATE_TOL == 1e-14


def test_builtin_svd_rule_gives_nan_in_trg_from_step_5(monkeypatch):
    # the trap this rule avoids: JAX's own SVD derivative on the 256 x 256 unfoldings
    import trglab.trg as trg

    def builtin(m, k):
        u, s, vh = jnp.linalg.svd(m, full_matrices=False)
        return u[:, :k], s[:k], vh[:k, :]

    ks = trg.schedule(16, 5)
    monkeypatch.setattr(trg, "truncated_svd", builtin)
    g4 = jax.grad(lambda b: trg.lnz_per_site(b, ks[:4]))(0.3)
    g5 = jax.grad(lambda b: trg.lnz_per_site(b, ks))(0.3)
    assert np.isfinite(g4) and np.isnan(g5)
