"""Levin-Nave TRG for a translation-invariant tensor T[u, l, d, r].

One step (``step``) turns the lattice of T into a lattice rotated by 45 degrees with half
as many sites:

1. normalise, n = ||T||_F, T <- T / n;
2. split T along (u, l) | (d, r) into F1[u, l, a] F3[a, d, r] and along (l, d) | (r, u)
   into F2[l, d, b] F4[b, r, u], keeping k singular triplets, sqrt(S) on both halves;
3. contract the four halves around a plaquette (top-left site gives F3, top-right F2,
   bottom-right F1, bottom-left F4) into T'[u, l, d, r], shape (k, k, k, k).

After n steps  ln Z / N = sum_i ln n_i / 2^i + ln(sum_ab T_abab) / 2^n.
"""

from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from .ising import site_tensor
from .svd import numerical_rank, truncated_svd


def split_ul_dr(t, k, factorize=None):
    """T[u, l, d, r] -> F1[u, l, a] (D, D, k), F3[a, d, r] (k, D, D).

    ``factorize(m, k) -> (u, s, vh)`` is the truncated factorisation (default: the exact
    rule ``svd.truncated_svd``; ``fastsvd.gram_truncated_svd`` is the cheaper option).
    """
    d = t.shape[0]
    u, s, vh = (factorize or truncated_svd)(t.reshape(d * d, d * d), k)
    root = jnp.sqrt(s)
    return (u * root[None, :]).reshape(d, d, k), (root[:, None] * vh).reshape(k, d, d)


def split_ld_ru(t, k, factorize=None):
    """T[u, l, d, r] -> F2[l, d, b] (D, D, k), F4[b, r, u] (k, D, D)."""
    return split_ul_dr(jnp.transpose(t, (1, 2, 3, 0)), k, factorize)


def contract_plaquette(f1, f2, f3, f4):
    """Four halves around a plaquette -> T'[u, l, d, r] of the rotated lattice.

    Bonds of the plaquette: x (top), y (left), z (right), w (bottom).
    T'[a, e, c, b] = sum F3[a, y, x] F2[x, z, b] F1[z, w, c] F4[e, w, y].
    """
    return jnp.einsum("ayx,xzb,zwc,ewy->aecb", f3, f2, f1, f4, optimize="optimal")


def step(t, k, factorize=None):
    """One TRG step: (T[u, l, d, r] (D,)*4, k) -> (T' (k,)*4, ln n) with n = ||T||_F.

    ``k`` is a Python int (static): the number of singular triplets kept in both splits.
    ``factorize`` as in ``split_ul_dr`` (default: the exact rule).
    """
    n = jnp.sqrt(jnp.sum(t * t))
    t = t / n
    f1, f3 = split_ul_dr(t, k, factorize)
    f2, f4 = split_ld_ru(t, k, factorize)
    return contract_plaquette(f1, f2, f3, f4), jnp.log(n)


def trace_term(t):
    """ln(sum_ab T_abab): the last tensor closed on a 1 x 1 periodic cell."""
    return jnp.log(jnp.einsum("abab->", t))


def lnz_per_site(beta, ks, factorize=None, step_fn=None):
    """ln Z / N after len(ks) TRG steps with truncations ks (a tuple of Python ints).

    ``step_fn(t, k) -> (t', ln n)`` replaces ``step`` (e.g. ``jax.checkpoint(step)``);
    by default ``step`` with ``factorize``.
    """
    t = site_tensor(beta)
    acc = 0.0
    for i, k in enumerate(ks):
        t, ln = step_fn(t, k) if step_fn is not None else step(t, k, factorize)
        acc = acc + ln / 2.0**i
    return acc + trace_term(t) / 2.0 ** len(ks)


def validate_schedule(ks, chi=None):
    """Check a truncation schedule; return it as a tuple of ints or raise ValueError.

    Bond dimension after step i is ks[i]; step i can keep at most (dim before)^2
    singular triplets.
    """
    try:
        ks = tuple(ks)
    except TypeError:
        raise ValueError(f"schedule must be a sequence of positive ints, got {ks!r}") from None
    if not ks:
        raise ValueError("schedule is empty: at least one step is needed")
    dim = 2
    for i, k in enumerate(ks):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"schedule entry {i} must be a positive int, got {k!r}")
        if k > dim * dim:
            raise ValueError(
                f"schedule entry {i} keeps {k} singular values, but the unfolding has rank <= {dim * dim}"
            )
        if chi is not None and k > chi:
            raise ValueError(f"schedule entry {i} = {k} exceeds chi = {chi}")
        dim = int(k)
    return tuple(int(k) for k in ks)


@lru_cache(maxsize=64)
def _step_jit(k):
    """``step`` with truncation k, compiled (one program per input shape)."""
    return jax.jit(partial(step, k=k))


@lru_cache(maxsize=256)
def schedule(chi, steps, beta=0.3, rtol=1e-12):
    """Static truncation schedule: k_i = min(chi, numerical rank of step i's unfoldings).

    Computed by one forward pass at ``beta`` (singular values above rtol * s_max count).
    Keeping a zero singular value would make the gradient NaN, hence the rank cap.
    For chi = 16 at beta = 0.3: (2, 4, 4, 16, 16, ...).
    """
    if chi < 2 or steps < 1:
        raise ValueError(f"need chi >= 2 and steps >= 1, got chi={chi}, steps={steps}")
    t = np.asarray(site_tensor(beta))
    ks = []
    for _ in range(steps):
        t = t / np.linalg.norm(t)
        d = t.shape[0]
        s1 = np.linalg.svd(t.reshape(d * d, d * d), compute_uv=False)
        s2 = np.linalg.svd(np.transpose(t, (1, 2, 3, 0)).reshape(d * d, d * d), compute_uv=False)
        k = min(chi, numerical_rank(s1, rtol), numerical_rank(s2, rtol))
        ks.append(k)
        t = np.asarray(_step_jit(k)(jnp.asarray(t))[0])
    return tuple(ks)
