"""The specific heat c = beta^2 d^2(ln Z/N)/d beta^2 by differentiating TRG twice.

The SVD rule in ``trglab.svd`` is a ``custom_jvp`` whose tangent rule calls the rule itself,
so JAX can differentiate the derivative again. Three ways to the second derivative of the
scalar function f(beta) = ln Z/N (``trg.lnz_per_site`` with a static schedule ks):

- ``rev_rev``  reverse over reverse: ``value_and_grad(grad(f))``;
- ``fwd_rev``  forward over reverse: ``jvp(value_and_grad(f), beta, 1)`` (Hessian-vector
  product; for one input it is the whole second derivative);
- ``fwd_fwd``  forward over forward: ``jvp(lambda b: jvp(f, b, 1), beta, 1)``; no stored
  residuals at all, natural here because f has a single input.

Each returns ln Z/N, g = d(ln Z/N)/d beta and g2 = d^2(ln Z/N)/d beta^2 from one compiled
program; u = -g and c = beta^2 g2. ``central_difference`` is the reference the AD results
are checked against: c = beta^2 (g(beta + h) - g(beta - h)) / (2 h) with the plain
gradient ``jit(value_and_grad(f))`` (the same schedule at both points).

``cost`` measures each way separately: trace + compile (ahead of time, ``jit(...).lower(...)
.compile()``), steady run time (minimum of repeats, ``block_until_ready``) and the memory XLA
plans for the program (``compiled.memory_analysis()``: temporary buffers, bytes).

``lnz_by_depth`` returns ln Z/N after every step 1..n of one run (a vector), so the
convergence in steps, with u and c at every depth, costs one forward-over-forward pass.
"""

import time
from functools import lru_cache, partial

import jax
import jax.numpy as jnp

import numpy as np

from .ising import site_tensor
from .scan import lnz_per_site_scan, split_schedule, tail_weights
from .trg import lnz_per_site, step, trace_term, validate_schedule

METHODS = ("rev_rev", "fwd_rev", "fwd_fwd")
FORMS = ("scan", "unrolled")
METHOD_LABELS = {
    "rev_rev": "reverse over reverse",
    "fwd_rev": "forward over reverse",
    "fwd_fwd": "forward over forward",
    "central": "central difference of two gradients",
}


def _check_method(method):
    if method not in METHODS:
        raise ValueError(f"unknown second-order method {method!r}; choose one of {', '.join(METHODS)}")


def _check_beta(beta):
    try:
        b = float(beta)
    except (TypeError, ValueError):
        raise ValueError(f"beta must be a positive number, got {beta!r}") from None
    if not b > 0 or b != b or b == float("inf"):
        raise ValueError(f"beta must be a positive finite number, got {beta!r}")
    return b


def _check_form(form):
    if form not in FORMS:
        raise ValueError(f"unknown form {form!r}; choose one of {', '.join(FORMS)}")


def lnz_fn(ks, form="scan"):
    """beta -> ln Z/N for the static schedule ks: ``scan.lnz_per_site_scan`` (the repeated
    steps in one ``lax.scan`` body, compiled once) or ``trg.lnz_per_site`` (every step
    unrolled). Same value; the scan form compiles in about half the time at 20 steps."""
    _check_form(form)
    ks = validate_schedule(ks)
    return partial(lnz_per_site_scan if form == "scan" else lnz_per_site, ks=ks)


def second_order_fn(method, ks, form="scan"):
    """The (not yet jitted) function beta -> (ln Z/N, g, g2) for one method and schedule ks."""
    _check_method(method)
    f = lnz_fn(ks, form)
    one = jnp.asarray(1.0, dtype=jnp.float64)

    if method == "rev_rev":
        def g_with_value(b):
            v, g = jax.value_and_grad(f)(b)
            return g, v

        def fn(b):
            (g, v), g2 = jax.value_and_grad(g_with_value, has_aux=True)(b)
            return v, g, g2
    elif method == "fwd_rev":
        def fn(b):
            (v, g), (_, g2) = jax.jvp(jax.value_and_grad(f), (b,), (one,))
            return v, g, g2
    else:
        def first(b):
            return jax.jvp(f, (b,), (one,))

        def fn(b):
            (v, g), (_, g2) = jax.jvp(first, (b,), (one,))
            return v, g, g2
    return fn


@lru_cache(maxsize=64)
def _jitted(method, ks, form):
    return jax.jit(second_order_fn(method, ks, form))


def derivatives(beta, ks, method="fwd_rev", form="scan"):
    """ln Z/N and its first two beta derivatives by second-order AD.

    Returns a dict with keys lnz, grad (= d(ln Z/N)/d beta), u (= -grad), g2 and
    c (= beta^2 g2), all Python floats. ks: static schedule (tuple of ints).
    The compiled program is cached per (method, ks, form) in this process only.
    """
    beta = _check_beta(beta)
    ks = validate_schedule(ks)
    _check_method(method)
    _check_form(form)
    v, g, g2 = _jitted(method, ks, form)(jnp.asarray(beta, dtype=jnp.float64))
    v, g, g2 = float(v), float(g), float(g2)
    return {"lnz": v, "grad": g, "u": -g, "g2": g2, "c": beta * beta * g2}


def specific_heat_ad(beta, ks, method="fwd_rev"):
    """c = beta^2 d^2(ln Z/N)/d beta^2 by second-order AD (float)."""
    return derivatives(beta, ks, method)["c"]


@lru_cache(maxsize=64)
def _grad_jitted(ks, form):
    return jax.jit(jax.value_and_grad(lnz_fn(ks, form)))


def central_difference(beta, ks, h=1e-5, form="scan"):
    """c = beta^2 (g(beta + h) - g(beta - h)) / (2 h), g from jit(value_and_grad) (float)."""
    beta = _check_beta(beta)
    ks = validate_schedule(ks)
    if not h > 0 or h >= beta:
        raise ValueError(f"step h must satisfy 0 < h < beta, got h={h!r}")
    _check_form(form)
    vg = _grad_jitted(ks, form)
    gp = float(vg(jnp.asarray(beta + h))[1])
    gm = float(vg(jnp.asarray(beta - h))[1])
    return beta * beta * (gp - gm) / (2.0 * h)


# --- cost --------------------------------------------------------------------------------

def _compile(fn, beta):
    """(seconds for trace + lower + compile, compiled executable)."""
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(jnp.asarray(beta, dtype=jnp.float64)).compile()
    return time.perf_counter() - t0, compiled


def _temp_bytes(compiled):
    try:
        ma = compiled.memory_analysis()
    except Exception:  # backend without memory analysis
        return None
    if ma is None:
        return None
    return int(ma.temp_size_in_bytes)


def _steady(call, repeat):
    best = float("inf")
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = jax.block_until_ready(call())
        best = min(best, time.perf_counter() - t0)
    return best, out


def cost(beta, ks, methods=METHODS + ("central",), h=1e-5, repeat=3, form="scan"):
    """Time and memory of each way to c at one beta. Returns a list of dicts with keys

    method, label, compile_s (trace + lower + compile, ahead of time), run_s (steady: minimum
    of ``repeat`` runs; for ``central`` the two gradient runs together), temp_mb (XLA temporary
    buffers of the compiled program, MiB; None if the backend does not report it), and the
    results lnz, grad (at beta; for ``central`` one more, untimed, gradient call) and c.
    Nothing is reused between methods or from earlier calls: every program is compiled here.
    ``form`` as in ``lnz_fn`` (the same for every method, so the rows compare).
    """
    beta = _check_beta(beta)
    ks = validate_schedule(ks)
    _check_form(form)
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    rows = []
    for method in methods:
        if method == "central":
            compile_s, comp = _compile(jax.value_and_grad(lnz_fn(ks, form)), beta)
            bp = jnp.asarray(beta + h, dtype=jnp.float64)
            bm = jnp.asarray(beta - h, dtype=jnp.float64)
            run_s, (vp, vm) = _steady(lambda: (comp(bp), comp(bm)), repeat)
            c = beta * beta * (float(vp[1]) - float(vm[1])) / (2.0 * h)
            v, g = (float(x) for x in comp(jnp.asarray(beta, dtype=jnp.float64)))  # not timed
        else:
            compile_s, comp = _compile(second_order_fn(method, ks, form), beta)
            b = jnp.asarray(beta, dtype=jnp.float64)
            run_s, (v, g, g2) = _steady(lambda: comp(b), repeat)
            v, g, c = float(v), float(g), beta * beta * float(g2)
        tb = _temp_bytes(comp)
        rows.append({"method": method, "label": METHOD_LABELS[method], "compile_s": compile_s,
                     "run_s": run_s, "temp_mb": None if tb is None else tb / 2**20,
                     "lnz": v, "grad": g, "c": c})
    return rows


# --- every depth in one pass --------------------------------------------------------------

def lnz_by_depth(beta, ks):
    """ln Z/N estimated after each of the n = len(ks) steps: a vector of shape (n,).

    Entry i (0-based) is the estimate after i + 1 steps,
    sum_{j <= i} ln n_j / 2^j + ln(sum_ab T_abab) / 2^(i+1), i.e. ``trg.lnz_per_site(beta,
    ks[:i + 1])`` computed along the way of a single run. The steps whose shapes repeat
    run in one ``lax.scan`` (as in ``scan.lnz_per_site_scan``) that emits the estimate of
    every depth; the same numbers as the unrolled loop (bit for bit at chi = 8, 16, 24,
    20 steps, for the value and both derivatives), compiled in about half the time.
    """
    ks = validate_schedule(ks)
    n = len(ks)
    start, k = split_schedule(ks)
    t = site_tensor(beta)
    acc = jnp.zeros((), dtype=jnp.float64)
    out = []
    for i in range(start):
        t, ln = step(t, ks[i])
        acc = acc + ln / 2.0**i
        out.append(acc + trace_term(t) / 2.0 ** (i + 1))
    parts = [jnp.stack(out)] if out else []
    if start < n:
        def body(carry, w):  # w = 2^-i for step i, so 2^-(i+1) = w / 2 exactly
            t, acc = carry
            t, ln = step(t, k)
            acc = acc + ln * w
            return (t, acc), acc + trace_term(t) * (w * 0.5)

        _, tail = jax.lax.scan(body, (t, acc), tail_weights(start, n))
        parts.append(tail)
    return jnp.concatenate(parts) if len(parts) > 1 else parts[0]


@lru_cache(maxsize=32)
def _by_depth_jitted(ks):
    f = partial(lnz_by_depth, ks=ks)
    one = jnp.asarray(1.0, dtype=jnp.float64)

    def first(b):
        return jax.jvp(f, (b,), (one,))

    def fn(b):
        (v, g), (_, g2) = jax.jvp(first, (b,), (one,))
        return v, g, g2

    return jax.jit(fn)


_BY_DEPTH_VALUES = {}  # (beta, ks) -> (v, g, g2) as tuples of floats, this process only


def derivatives_by_depth(beta, ks, reuse=True):
    """ln Z/N, u and c after every step 1..len(ks) of one run (forward over forward).

    Returns a dict of lists (length len(ks)): steps, lnz, u, c. Results are kept in this
    process per (beta, ks): with ``reuse`` a point computed before is not computed again
    (a page asks for the same point in several tables); ``reuse=False`` always runs the
    program (for timing) and stores the fresh result.
    """
    beta = _check_beta(beta)
    ks = validate_schedule(ks)
    key = (beta, ks)
    if not reuse or key not in _BY_DEPTH_VALUES:
        v, g, g2 = _by_depth_jitted(ks)(jnp.asarray(beta, dtype=jnp.float64))
        _BY_DEPTH_VALUES[key] = tuple(tuple(float(x) for x in np.asarray(a)) for a in (v, g, g2))
    v, g, g2 = _BY_DEPTH_VALUES[key]
    return {"steps": list(range(1, len(ks) + 1)), "lnz": list(v),
            "u": [-x for x in g], "c": [beta * beta * x for x in g2]}
