"""The pitfall page "checkpoint：从第 5 步起梯度变了": why ``jax.checkpoint`` changes the gradient.

Mechanism (measured by ``probe_recompute`` and confirmed by ``sign_mismatch_grad``):

1. ``jax.checkpoint`` saves the input T_i of every step and recomputes the step in the
   backward pass. Under ``jit`` XLA compiles the recomputation as part of the backward
   program, so its arithmetic (fusion, reduction order) differs from the forward one:
   the recomputed T_i / n_i differs from the original in the last bit.
2. By the Z2 symmetry of the Ising model many entries of the unfoldings are zero in exact
   arithmetic and +-1e-17 noise in floating point. LAPACK's Householder reflections
   choose their sign from such entries, so a one-ulp change can flip the sign of whole
   singular triplets (u_j, v_j) -> (-u_j, -v_j). The factorisation and T_(i+1) stay
   valid, but T_(i+1) comes out in another gauge: T'[a, e, c, b] * d1[a] d1[c] d2[e] d2[b].
3. The cotangent of T_(i+1) was computed by step i+1's backward at the *original*
   T_(i+1) (its saved input). Step i's backward pulls it back through the Jacobian at the
   *recomputed*, sign-flipped gauge: the two do not match and the gradient is wrong.
   With n steps only steps 1..n-1 can be hurt (the last one feeds the gauge-invariant
   trace); at chi = 16, beta = 0.3 the first flips happen at step 4, hence "from 5 steps".

Arrays: T[u, l, d, r]; the sign patterns d1 (split (u,l)|(d,r)) and d2 (split
(l,d)|(r,u)) are vectors of +-1 of length k_i.
"""

import collections
import sys
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from ..grads import value_and_grad
from ..ising import site_tensor
from ..svd import truncated_svd
from ..trg import contract_plaquette, lnz_per_site, schedule, split_ld_ru, split_ul_dr, step, trace_term, validate_schedule
from ._cli import parse_beta_chi_steps


# --- live gradients ------------------------------------------------------------------

def gradient_rows(beta, chi, steps_list, eager_max=6):
    """Plain vs checkpointed gradient per depth (jit), and checkpointed without jit.

    Returns dicts with steps, plain, ckpt_jit, diff_jit = ckpt_jit - plain, and (for
    steps <= eager_max, else None) ckpt_eager, diff_eager. Op-by-op checkpointing is
    slow, hence ``eager_max``.
    """
    rows = []
    for n in sorted(steps_list):
        ks = schedule(chi, n, beta)
        plain = value_and_grad(beta, ks, method="whole", jit=True)[1]
        ck = value_and_grad(beta, ks, method="checkpoint", jit=True)[1]
        row = {"steps": n, "plain": plain, "ckpt_jit": ck, "diff_jit": ck - plain,
               "ckpt_eager": None, "diff_eager": None}
        if n <= eager_max:
            ce = value_and_grad(beta, ks, method="checkpoint", jit=False)[1]
            row.update(ckpt_eager=ce, diff_eager=ce - plain)
        rows.append(row)
    return rows


def first_differing_depth(rows, tol=1e-8):
    """Smallest depth whose |ckpt_jit - plain| exceeds tol, or None."""
    bad = [r["steps"] for r in rows if abs(r["diff_jit"]) > tol]
    return min(bad) if bad else None


# --- probing the recomputation ---------------------------------------------------------

def _probed_step(t, index, k, log):
    """``trg.step`` with host callbacks on T/n (``tn``) and on the halves F1, F2."""
    n = jnp.sqrt(jnp.sum(t * t))
    t = t / n

    def rec(tag, x):
        log[(index, tag)].append(np.array(x))

    jax.debug.callback(partial(rec, "tn"), t)
    f1, f3 = split_ul_dr(t, k)
    f2, f4 = split_ld_ru(t, k)
    jax.debug.callback(partial(rec, "f1"), f1)
    jax.debug.callback(partial(rec, "f2"), f2)
    return contract_plaquette(f1, f2, f3, f4), jnp.log(n)


def _lnz_probed(beta, ks, log, ckpt):
    t = site_tensor(beta)
    acc = 0.0
    for i, k in enumerate(ks):
        f = partial(_probed_step, index=i, k=k, log=log)
        if ckpt:
            f = jax.checkpoint(f)
        t, ln = f(t)
        acc = acc + ln / 2.0**i
    return acc + trace_term(t) / 2.0 ** len(ks)


def column_signs(fa, fb):
    """Overlaps of the unit columns of two halves F[..., j] (last axis = kept index).

    Returns (signs, max_offdiag): signs[j] = round(<a_j, b_j>) in {-1, 0, +1}, and the
    largest |<a_i, b_j>|, i != j (0 when b is a pure sign gauge of a).
    """
    a = fa.reshape(-1, fa.shape[-1])
    b = fb.reshape(-1, fb.shape[-1])
    a = a / np.linalg.norm(a, axis=0)
    b = b / np.linalg.norm(b, axis=0)
    ov = a.T @ b
    diag = np.diag(ov)
    off = np.abs(ov - np.diag(diag)).max() if ov.shape[0] > 1 else 0.0
    return np.rint(diag).astype(int), float(off)


def _ulps(a, b):
    """Largest distance in units in the last place between two float64 arrays."""
    ia = a.view(np.int64)
    ib = b.view(np.int64)
    # map to a monotone integer line so that -0.0 and +0.0 are neighbours
    ia = np.where(ia < 0, np.int64(-(2**63)) - ia, ia)
    ib = np.where(ib < 0, np.int64(-(2**63)) - ib, ib)
    return int(np.max(np.abs(ia.astype(object) - ib.astype(object)))) if a.size else 0


def probe_recompute(beta, ks, jit=True):
    """Run grad of the checkpointed ln Z/N with probes; compare forward and recomputation.

    Returns (grad, rows): one row per step i (1-based) with
      tn_bits_differ: entries of T_i / n_i whose bits differ (forward vs recomputed),
      tn_max_ulps, tn_max_abs: the largest difference in ulps and absolutely,
      tiny_entries: entries with |x| < 1e-14 max|x| (zero by symmetry),
      tiny_sign_changes: tiny entries whose sign differs,
      flips1 / flips2: triplets with opposite sign in the recomputed split (u,l)|(d,r) /
      (l,d)|(r,u), signs1 / signs2 the full sign patterns, offdiag: largest off-diagonal
      overlap (0 for a pure sign change).
    ``recomputed`` is False for steps that were not recomputed (no checkpoint).
    """
    ks = validate_schedule(ks)
    log = collections.defaultdict(list)
    g = jax.grad(partial(_lnz_probed, ks=ks, log=log, ckpt=True))
    if jit:
        g = jax.jit(g)
    grad = float(g(jnp.asarray(beta, dtype=jnp.float64)))
    jax.effects_barrier()
    rows = []
    for i, k in enumerate(ks):
        tns, f1s, f2s = log[(i, "tn")], log[(i, "f1")], log[(i, "f2")]
        if len(tns) < 2:
            rows.append({"step": i + 1, "k": k, "recomputed": False})
            continue
        ta, tb = tns[0], tns[-1]
        tiny = np.abs(ta) < 1e-14 * np.abs(ta).max()
        s1, off1 = column_signs(f1s[0], f1s[-1])
        s2, off2 = column_signs(f2s[0], f2s[-1])
        rows.append({
            "step": i + 1, "k": k, "recomputed": True,
            "tn_bits_differ": int(np.sum(ta.view(np.int64) != tb.view(np.int64))),
            "tn_size": int(ta.size),
            "tn_max_ulps": _ulps(ta, tb),
            "tn_max_abs": float(np.max(np.abs(ta - tb))),
            "tiny_entries": int(tiny.sum()),
            "tiny_sign_changes": int(np.sum(tiny & (np.signbit(ta) != np.signbit(tb)) & (ta != tb))),
            "flips1": int(np.sum(s1 < 0)), "flips2": int(np.sum(s2 < 0)),
            "signs1": s1.tolist(), "signs2": s2.tolist(),
            "offdiag": max(off1, off2),
            "flips_outside": outside_svd_flips(ta, tb, k),
        })
    return grad, rows


def outside_svd_flips(ta, tb, k):
    """Flipped kept triplets when the *same* SVD call (jnp.linalg.svd, outside any graph)
    is applied to two recorded inputs T/n (both splits together)."""
    d = ta.shape[0]
    flips = 0
    for perm in ((0, 1, 2, 3), (1, 2, 3, 0)):
        ua = np.asarray(jnp.linalg.svd(jnp.asarray(np.transpose(ta, perm).reshape(d * d, d * d)), full_matrices=False)[0])
        ub = np.asarray(jnp.linalg.svd(jnp.asarray(np.transpose(tb, perm).reshape(d * d, d * d)), full_matrices=False)[0])
        signs, _ = column_signs(ua[:, :k], ub[:, :k])
        flips += int(np.sum(signs < 0))
    return flips


# --- the sign-mismatch model ----------------------------------------------------------

def step_with_signs(t, k, d1, d2):
    """``trg.step`` with the kept triplets of the two splits multiplied by signs d1, d2.

    d1, d2: (k,) arrays of +-1. Returns (T'[u, l, d, r] in the flipped gauge, ln n):
    T'_flipped[a, e, c, b] = d1[a] d2[e] d1[c] d2[b] T'[a, e, c, b].
    """
    n = jnp.sqrt(jnp.sum(t * t))
    t = t / n
    f1, f3 = split_ul_dr(t, k)
    f2, f4 = split_ld_ru(t, k)
    d1 = jnp.asarray(d1, dtype=t.dtype)
    d2 = jnp.asarray(d2, dtype=t.dtype)
    f1, f3 = f1 * d1[None, None, :], d1[:, None, None] * f3
    f2, f4 = f2 * d2[None, None, :], d2[:, None, None] * f4
    return contract_plaquette(f1, f2, f3, f4), jnp.log(n)


@lru_cache(maxsize=64)
def _step_vjp_program(k):
    """One compiled program per k: (T_i, d1, d2, ct_T, ct_ln) -> (T_(i+1), ln n_i, ct_T_i).

    The forward chain and the backward both run *this* program, so for the same input
    bits they see the same SVD (the same gauge) and differ only by the signs d1, d2.
    """
    def run(t, d1, d2, ct_t, ct_ln):
        (t_next, ln), vjp = jax.vjp(lambda x: step_with_signs(x, k, d1, d2), t)
        (ct,) = vjp((ct_t, ct_ln))
        return t_next, ln, ct

    return jax.jit(run)


def sign_mismatch_grad(beta, ks, signs):
    """Gradient of a staged backward whose step i is differentiated in a flipped gauge.

    The forward is the plain one (T_(i+1) in the original gauge, as saved by the
    checkpoints); step i's vjp is taken at ``step_with_signs(T_i, k_i, *signs[i])`` and
    applied to the cotangent coming from step i+1, exactly what the recomputation does.
    signs: list of (d1, d2) per step, or None for "no flip". All +1 gives the plain
    gradient (to rounding). Returns a float.
    """
    ks = validate_schedule(ks)
    if len(signs) != len(ks):
        raise ValueError(f"need one sign pair (or None) per step: {len(signs)} for {len(ks)} steps")
    t, site_vjp = jax.vjp(site_tensor, jnp.asarray(beta, dtype=jnp.float64))
    inputs = []
    for k in ks:
        inputs.append(t)
        ones = jnp.ones(k)
        t, _, _ = _step_vjp_program(k)(t, ones, ones, jnp.zeros((k,) * 4), jnp.asarray(0.0))
    _, trace_vjp = jax.vjp(trace_term, t)
    (ct,) = trace_vjp(jnp.asarray(1.0 / 2.0 ** len(ks)))
    for i in reversed(range(len(ks))):
        k = ks[i]
        d1, d2 = signs[i] if signs[i] is not None else (np.ones(k), np.ones(k))
        _, _, ct = _step_vjp_program(k)(inputs[i], jnp.asarray(d1, dtype=jnp.float64),
                                        jnp.asarray(d2, dtype=jnp.float64), ct, jnp.asarray(1.0 / 2.0**i))
    (g,) = site_vjp(ct)
    return float(g)


def signs_from_probe(rows):
    """[(d1, d2) or None per step] from ``probe_recompute`` rows."""
    out = []
    for r in rows:
        if r.get("recomputed"):
            out.append((np.array(r["signs1"], dtype=float), np.array(r["signs2"], dtype=float)))
        else:
            out.append(None)
    return out


def per_step_contributions(beta, ks, signs, plain):
    """Gradient error caused by the flips of one step alone: list of (step, flips, error)."""
    out = []
    for i, s in enumerate(signs):
        if s is None or (np.all(s[0] > 0) and np.all(s[1] > 0)):
            continue
        only = [None] * len(signs)
        only[i] = s
        out.append({"step": i + 1, "flips": int(np.sum(s[0] < 0) + np.sum(s[1] < 0)),
                    "error": sign_mismatch_grad(beta, ks, only) - plain})
    return out


def probe_table(rows):
    """Display rows of ``probe_recompute`` (sign patterns as strings of + and -)."""
    out = []
    for r in rows:
        if not r.get("recomputed"):
            out.append({"step": r["step"], "k": r["k"], "recomputed": False})
            continue
        out.append({
            "step": r["step"], "k": r["k"],
            "bits differ": f"{r['tn_bits_differ']}/{r['tn_size']}",
            "max ulps": r["tn_max_ulps"], "max |diff|": r["tn_max_abs"],
            "flips (u,l)|(d,r)": r["flips1"], "flips (l,d)|(r,u)": r["flips2"],
            "flips, same SVD outside": r["flips_outside"],
            "signs (u,l)|(d,r)": "".join("+" if x > 0 else "-" for x in r["signs1"]),
            "off-diagonal": r["offdiag"],
        })
    return out


def last_step_flip_error(beta, ks, seed=0):
    """Gradient error when only the last step is differentiated in a random sign gauge.

    The last step feeds the trace sum_ab T_abab, which is invariant under the gauge, so
    this is ~1e-16: why n steps are safe as long as the first n-1 steps do not flip.
    """
    ks = validate_schedule(ks)
    rng = np.random.default_rng(seed)
    k = ks[-1]
    signs = [None] * len(ks)
    signs[-1] = (rng.choice([-1.0, 1.0], k), rng.choice([-1.0, 1.0], k))
    plain = sign_mismatch_grad(beta, ks, [None] * len(ks))
    return sign_mismatch_grad(beta, ks, signs) - plain


# --- singular values around the cut ---------------------------------------------------

def spectrum_at_cut(beta, ks, rtol=1e-12):
    """Per step: s_k / s_1, s_(k+1) / s_1, relative gap at the cut, smallest relative gap
    between neighbouring kept values, and the number of numerically zero values (numpy)."""
    ks = validate_schedule(ks)
    t = np.asarray(site_tensor(beta))
    rows = []
    for i, k in enumerate(ks):
        tn = t / np.linalg.norm(t)
        d = tn.shape[0]
        s = np.linalg.svd(tn.reshape(d * d, d * d), compute_uv=False)
        kept = s[:k]
        rel = np.abs(np.diff(kept)) / kept[:-1] if k > 1 else np.array([np.inf])
        nxt = s[k] if k < s.size else 0.0
        rows.append({"step": i + 1, "k": k, "size": int(s.size),
                     "s_k": float(s[k - 1] / s[0]), "s_k1": float(nxt / s[0]),
                     "cut_gap": float((s[k - 1] - nxt) / s[k - 1]),
                     "min_kept_gap": float(rel.min()),
                     "zeros": int(np.sum(s <= rtol * s[0]))})
        t = np.asarray(step(jnp.asarray(t), k)[0])
    return rows


# --- a robust variant: fix the sign gauge ---------------------------------------------

@lru_cache(maxsize=None)
def _probe_vector(n):
    """A fixed pseudo-random unit vector of length n (the same on every machine)."""
    w = np.random.default_rng(20260519).standard_normal(n)
    return w / np.linalg.norm(w)


def _split_fixed(m, k, d):
    u, s, vh = truncated_svd(m, k)
    sg = jnp.sign(jnp.asarray(_probe_vector(m.shape[0])) @ u)  # (k,), derivative 0
    sg = jnp.where(sg == 0, 1.0, sg)
    u, vh = u * sg[None, :], sg[:, None] * vh
    root = jnp.sqrt(s)
    return (u * root[None, :]).reshape(d, d, k), (root[:, None] * vh).reshape(k, d, d)


def step_sign_fixed(t, k):
    """``trg.step`` with a deterministic sign gauge: sign(w . u_j) = +1 for a fixed w.

    The gauge no longer depends on the last bit of the input, so a recomputation lands in
    the same gauge as the forward pass (unless w . u_j is ~0, or two kept singular values
    are so close that the vectors themselves rotate).
    """
    n = jnp.sqrt(jnp.sum(t * t))
    t = t / n
    d = t.shape[0]
    f1, f3 = _split_fixed(t.reshape(d * d, d * d), k, d)
    f2, f4 = _split_fixed(jnp.transpose(t, (1, 2, 3, 0)).reshape(d * d, d * d), k, d)
    return contract_plaquette(f1, f2, f3, f4), jnp.log(n)


def _lnz_sign_fixed(beta, ks, ckpt):
    st = jax.checkpoint(step_sign_fixed, static_argnums=(1,)) if ckpt else step_sign_fixed
    return lnz_per_site(beta, ks, step_fn=st)


def grad_sign_fixed(beta, ks, ckpt=True, jit=True):
    """d(ln Z/N)/d beta with the sign-fixed step, optionally checkpointed (float)."""
    ks = validate_schedule(ks)
    g = jax.grad(partial(_lnz_sign_fixed, ks=ks, ckpt=ckpt))
    if jit:
        g = jax.jit(g)
    return float(g(jnp.asarray(beta, dtype=jnp.float64)))


# --- the check --------------------------------------------------------------------------

class CheckpointMismatch(AssertionError):
    """The checkpointed gradient disagrees with the plain one on a short chain."""


def check_checkpoint(grad_plain, grad_ckpt, beta, ks, atol=1e-12):
    """Compare a checkpointed and a plain gradient on a short chain before trusting a long one.

    grad_plain, grad_ckpt: callables (beta, ks) -> float. Raises CheckpointMismatch (one
    line) at the first depth 1..len(ks) where they differ by more than atol; returns the
    list of differences otherwise.
    """
    diffs = []
    for n in range(1, len(ks) + 1):
        d = grad_ckpt(beta, ks[:n]) - grad_plain(beta, ks[:n])
        diffs.append(d)
        if not abs(d) <= atol:
            raise CheckpointMismatch(f"checkpointed gradient differs from the plain one at {n} steps by {d:.3e} (> {atol:g})")
    return diffs


def main(argv=None):
    args = parse_beta_chi_steps("checkpoint_jax", [4, 5, 6], argv)
    if args is None:
        return 2
    for r in gradient_rows(args.beta, args.chi, args.steps):
        print(f"steps={r['steps']:2d} grad={r['plain']:.15f} grad with jax.checkpoint per step (jit)={r['ckpt_jit']:.15f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
