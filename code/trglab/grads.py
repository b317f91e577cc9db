"""Three ways to d(ln Z / N)/d beta through TRG, and the specific heat.

- whole graph: ``jax.value_and_grad`` of the full function, with or without ``jit``;
- checkpoint: ``jax.checkpoint`` around every step (k static), with or without ``jit``;
- staged: each step is its own ``jax.vjp``; the cotangents are passed back by hand from
  the last step. T_i reaches ln Z / N through T_(i+1) and through ln n_i / 2^i, so

      ct(T_i) = vjp_i(ct(T_(i+1)), 1 / 2^i),   ct(T_n) = d(trace term)/dT_n.

All return ``(ln Z / N, d(ln Z / N)/d beta)`` as Python floats; u = -grad and
c = beta^2 d^2(ln Z / N)/d beta^2.
"""

from functools import lru_cache, partial

import jax
import jax.numpy as jnp

from .ising import site_tensor
from .trg import lnz_per_site, step, trace_term, validate_schedule

METHODS = ("whole", "checkpoint", "staged")


def lnz_checkpointed(beta, ks):
    """ln Z / N with ``jax.checkpoint`` around every step (recompute in the backward pass)."""
    return lnz_per_site(beta, ks, step_fn=jax.checkpoint(step, static_argnums=(1,)))


@lru_cache(maxsize=128)
def _compiled(kind, ks, jit):
    fn = lnz_per_site if kind == "whole" else lnz_checkpointed
    vg = jax.value_and_grad(partial(fn, ks=ks))
    return jax.jit(vg) if jit else vg


def value_and_grad_whole(beta, ks, jit=True):
    """(ln Z/N, grad) from ``jax.value_and_grad`` of the whole TRG graph."""
    ks = validate_schedule(ks)
    v, g = _compiled("whole", ks, jit)(jnp.asarray(beta, dtype=jnp.float64))
    return float(v), float(g)


def value_and_grad_checkpoint(beta, ks, jit=True):
    """(ln Z/N, grad) with ``jax.checkpoint`` around every step."""
    ks = validate_schedule(ks)
    v, g = _compiled("checkpoint", ks, jit)(jnp.asarray(beta, dtype=jnp.float64))
    return float(v), float(g)


# --- staged -----------------------------------------------------------------------------

def _step_forward(t, k):
    """(T_(i+1), ln n_i, vjp_i) for one step; vjp_i is a pytree (jax.tree_util.Partial)."""
    (t_next, ln), vjp = jax.vjp(partial(step, k=k), t)
    return t_next, ln, vjp


@lru_cache(maxsize=64)
def _step_forward_jit(k):
    return jax.jit(partial(_step_forward, k=k))


def _apply_vjp(vjp, ct):
    return vjp(ct)


_apply_vjp_jit = jax.jit(_apply_vjp)


def _trace_vjp(t):
    return jax.vjp(trace_term, t)


_trace_vjp_jit = jax.jit(_trace_vjp)


def staged_forward(beta, ks, jit=True):
    """Forward pass, one graph per step. Returns (lnz, tensors, vjps, site_vjp, trace_vjp)."""
    ks = validate_schedule(ks)
    t, site_vjp = jax.vjp(site_tensor, jnp.asarray(beta, dtype=jnp.float64))
    lnz = 0.0
    vjps = []
    for i, k in enumerate(ks):
        fwd = _step_forward_jit(k) if jit else partial(_step_forward, k=k)
        t, ln, vjp = fwd(t)
        vjps.append(vjp)
        lnz = lnz + ln / 2.0**i
    tr, trace_vjp = (_trace_vjp_jit if jit else _trace_vjp)(t)
    lnz = lnz + tr / 2.0 ** len(ks)
    return lnz, vjps, site_vjp, trace_vjp


def staged_backward(ks, vjps, site_vjp, trace_vjp, jit=True):
    """Pass the cotangents back by hand: ct(T_i) = vjp_i(ct(T_(i+1)), 1/2^i)."""
    apply = _apply_vjp_jit if jit else _apply_vjp
    n = len(ks)
    (ct_t,) = apply(trace_vjp, jnp.asarray(1.0 / 2.0**n))
    for i in reversed(range(n)):
        (ct_t,) = apply(vjps[i], (ct_t, jnp.asarray(1.0 / 2.0**i)))
    (g,) = site_vjp(ct_t)
    return g


def value_and_grad_staged(beta, ks, jit=True):
    """(ln Z/N, grad) with one ``jax.vjp`` per step and cotangents passed back by hand."""
    ks = validate_schedule(ks)
    lnz, vjps, site_vjp, trace_vjp = staged_forward(beta, ks, jit=jit)
    g = staged_backward(ks, vjps, site_vjp, trace_vjp, jit=jit)
    return float(lnz), float(g)


def value_and_grad(beta, ks, method="staged", jit=True):
    """Dispatch on ``method`` in METHODS."""
    if method == "whole":
        return value_and_grad_whole(beta, ks, jit=jit)
    if method == "checkpoint":
        return value_and_grad_checkpoint(beta, ks, jit=jit)
    if method == "staged":
        return value_and_grad_staged(beta, ks, jit=jit)
    raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")


def specific_heat_fd(beta, ks, h=1e-5, method="staged", jit=True):
    """c = beta^2 (g(beta + h) - g(beta - h)) / (2 h), g = d(ln Z/N)/d beta (same schedule)."""
    _, gp = value_and_grad(beta + h, ks, method=method, jit=jit)
    _, gm = value_and_grad(beta - h, ks, method=method, jit=jit)
    return beta**2 * (gp - gm) / (2 * h)
