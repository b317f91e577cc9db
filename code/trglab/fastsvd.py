"""A cheaper truncated factorisation for the rank-k cut: eigh of the Gram matrix.

For the unfolding m (M, N) of a TRG step, instead of the thin SVD of m (LAPACK gesdd)
this computes the symmetric eigendecomposition of the Gram matrix g = m^T m (N, N):

    g = V diag(lam) V^T,  lam descending,  s_i = sqrt(lam_i),  u_i = m v_i / s_i  (i < k).

At chi = 16 (256 x 256 unfoldings) ``eigh`` costs about 2.5x less than ``svd`` on CPU.
The price is precision: lam carries an absolute error ~ eps * lam_max, so a kept s_i has
a relative error ~ eps * (s_max / s_i)^2 / 2 (about 3e-7 for s_i / s_max = 2e-5, which
occurs at step 4 of the chi = 16 schedule). The book's recorded figures therefore stay
on the exact rule in ``trglab.svd``; this is an option, and ``bench`` states its effect.

Derivative. ``eigh_full`` is a ``custom_jvp`` with the textbook eigenvector rule
``dV = V (F * (V^T dG V))``, F[i, j] = 1 / (lam_j - lam_i), and F set to 0 for
(near-)degenerate pairs, |lam_j - lam_i| < ``svd.DEGENERATE_TOL`` (lam = s^2, so this is
the same criterion as the exact SVD rule). It uses all N eigenpairs, discarded ones
included, so the derivative of the truncated factorisation is exact (up to the forward
precision above), not the "projector only" approximation. The tangent rule calls
``eigh_full`` again, so it can be differentiated again (second order works).
The rest (g = m^T m, sqrt, u = m v / s) is plain JAX.
"""

import jax
import jax.numpy as jnp

from .svd import DEGENERATE_TOL
from .trg import lnz_per_site, step


def _safe_inverse_gap(lam):
    """F[i, j] = 1 / (lam_j - lam_i), 0 where |lam_j - lam_i| < DEGENERATE_TOL; shape (N, N)."""
    gap = lam[None, :] - lam[:, None]
    small = jnp.abs(gap) < DEGENERATE_TOL
    return jnp.where(small, 0.0, 1.0 / jnp.where(small, 1.0, gap))


@jax.custom_jvp
def eigh_full(g):
    """Eigendecomposition of a real symmetric g (N, N): lam (N,) descending, V (N, N) columns."""
    lam, v = jnp.linalg.eigh(g)
    return lam[::-1], v[:, ::-1]


@eigh_full.defjvp
def _eigh_full_jvp(primals, tangents):
    (g,), (dg,) = primals, tangents
    lam, v = eigh_full(g)  # recursive call: the rule is itself differentiable
    dg = 0.5 * (dg + dg.T)
    dp = v.T @ dg @ v
    dlam = jnp.diagonal(dp)
    dv = v @ (_safe_inverse_gap(lam) * dp)
    return (lam, v), (dlam, dv)


def gram_truncated_svd(m, k):
    """The k leading singular triplets of m (M, N) via eigh of the smaller Gram matrix.

    Returns u (M, k), s (k,) descending, vh (k, N), like ``svd.truncated_svd``. ``k`` is a
    Python int (static) and the k kept singular values must be nonzero (TRG's schedule
    guarantees it: k <= numerical rank).
    """
    n_rows, n_cols = m.shape
    if not 1 <= k <= min(n_rows, n_cols):
        raise ValueError(f"k must be in 1..{min(n_rows, n_cols)} for a {n_rows}x{n_cols} matrix, got {k}")
    if n_rows < n_cols:  # factor the transpose: m^T = v s u^T
        u, s, vh = gram_truncated_svd(m.T, k)
        return vh.T, s, u.T
    lam, v = eigh_full(m.T @ m)
    s = jnp.sqrt(lam[:k])
    vk = v[:, :k]
    u = (m @ vk) / s[None, :]
    return u, s, vk.T


def step_gram(t, k):
    """One TRG step like ``trg.step`` (T (D,)*4, k) -> (T' (k,)*4, ln n), cut by the Gram rule."""
    return step(t, k, factorize=gram_truncated_svd)


def lnz_per_site_gram(beta, ks):
    """ln Z / N after len(ks) steps, every cut by the Gram rule (compare trg.lnz_per_site)."""
    return lnz_per_site(beta, ks, factorize=gram_truncated_svd)


def compare_with_exact(beta=0.3, chi=16, steps=8):
    """Effect of the Gram rule on the figures: dict of lnz, grad and c, exact vs Gram.

    The scan form (``trglab.scan``) is used for both, with ``trg.step`` (exact) and
    ``step_gram``; c = beta^2 d^2(ln Z/N)/d beta^2 by forward-over-reverse AD.
    Keys: ``{name}_exact``, ``{name}_gram``, ``{name}_rel`` for name in lnz, grad, c.
    """
    from . import scan
    from .trg import schedule

    ks = schedule(chi, steps, beta)
    out = {"beta": beta, "chi": chi, "steps": steps}
    b = jnp.asarray(beta, dtype=jnp.float64)
    for label, fn in (("exact", None), ("gram", step_gram)):
        kw = {} if fn is None else {"step_fn": fn}

        def f(x, kw=kw):
            return scan.lnz_per_site_scan(x, ks, **kw)

        lnz, g = jax.jit(jax.value_and_grad(f))(b)
        c = beta**2 * jax.jit(jax.grad(jax.grad(f)))(b)
        out[f"lnz_{label}"], out[f"grad_{label}"], out[f"c_{label}"] = float(lnz), float(g), float(c)
    for name in ("lnz", "grad", "c"):
        ex, gr = out[f"{name}_exact"], out[f"{name}_gram"]
        out[f"{name}_rel"] = abs(gr - ex) / abs(ex)
    return out
