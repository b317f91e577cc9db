"""p25_whole_graph, JAX side: ``jax.grad`` of the whole TRG graph, step by step.

For each depth (number of TRG steps, schedule ``trg.schedule(chi, steps, beta)``):

- the number of equations in ``jax.make_jaxpr(jax.grad(f))`` and the time of that
  call (trace + autodiff transform, no compile);
- the first call of a fresh ``jax.jit(jax.grad(f))`` (trace + transform + compile + run);
- the gradient d(ln Z/N)/d beta.

The seed's minimal chain ``y <- (y * y) / 2`` (each value used twice per layer) gets the
same ``make_jaxpr(grad)`` measurement, and ``staged_fix`` times the staged program (one
``jax.vjp`` per step, cotangents passed back by hand, ``trglab.grads``) next to the whole
graph gradient.

    python -m trglab.experiments.p25_whole_graph [--steps 1 2 3 4 5 20] [--chi 16] [--beta 0.3]
                                                [--chain 16 20 24 30]

prints one line per run in the seed's format (here the seed's own 5-step line, M2 Max):

    trg steps= 5 eqns 1038 make_jaxpr(grad) 68.52 ms first jit(grad) call 361.30 ms grad=0.744793433247367
    mul n=30 eqns ... make_jaxpr(grad) 7.00 ms grad=...
"""

import argparse
import sys
import time
from functools import partial

import jax
import jax.numpy as jnp

from ..grads import value_and_grad
from ..timing import first_and_steady, timed
from ..trg import lnz_per_site, schedule, validate_schedule

CHAIN_Y0 = 2.0  # the fixed point of y -> y*y/2: y stays 2 and the gradient is exactly 2**layers


def _check_beta(beta):
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not beta > 0:
        raise ValueError(f"beta must be a positive number, got {beta!r}")
    return float(beta)


def _check_positive_int(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def _check_list(name, values, minimum=1):
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a non-empty list of ints >= {minimum}, got {values!r}")
    values = list(values)
    if not values:
        raise ValueError(f"{name} must be a non-empty list of ints >= {minimum}, got []")
    for v in values:
        _check_positive_int(f"every entry of {name}", v, minimum)
    return values


def count_eqns(closed_jaxpr, recursive=False):
    """Number of equations of a ClosedJaxpr: top level, or including sub-jaxprs
    (pjit, custom_jvp_call, ...) when ``recursive``."""
    jaxpr = getattr(closed_jaxpr, "jaxpr", closed_jaxpr)
    n = len(jaxpr.eqns)
    if recursive:
        for eqn in jaxpr.eqns:
            for sub in _sub_jaxprs(eqn.params.values()):
                n += count_eqns(sub, recursive=True)
    return n


def _sub_jaxprs(values):
    for v in values:
        if hasattr(v, "eqns") or hasattr(getattr(v, "jaxpr", None), "eqns"):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from _sub_jaxprs(v)


# --- whole TRG graph ---------------------------------------------------------------

def whole_graph_run(beta, ks):
    """One whole-graph gradient at schedule ``ks`` (tuple of ints, one per step).

    Returns a dict: steps, ks, eqns (top-level equations of make_jaxpr(grad)),
    eqns_all (including sub-jaxprs), make_jaxpr_ms, first_jit_ms (fresh jit(grad):
    trace + transform + compile + run, block_until_ready), grad (float).
    """
    beta = _check_beta(beta)
    ks = validate_schedule(ks)
    f = partial(lnz_per_site, ks=ks)
    x = jnp.asarray(beta, dtype=jnp.float64)
    jaxpr_s, closed = timed(lambda: jax.make_jaxpr(jax.grad(f))(x))
    first_s, g = timed(jax.jit(jax.grad(f)), x)  # a fresh jit object: compile included
    return {
        "steps": len(ks),
        "ks": list(ks),
        "eqns": count_eqns(closed),
        "eqns_all": count_eqns(closed, recursive=True),
        "make_jaxpr_ms": jaxpr_s * 1e3,
        "first_jit_ms": first_s * 1e3,
        "grad": float(g),
    }


def whole_graph_runs(beta, chi, steps_list):
    """``whole_graph_run`` for every number of steps in steps_list (schedule from chi)."""
    beta = _check_beta(beta)
    chi = _check_positive_int("chi", chi, 2)
    steps_list = _check_list("steps_list", steps_list)
    full = schedule_prefix(chi, max(steps_list), beta)
    _warm_up(partial(lnz_per_site, ks=full[:1]), beta)
    return [whole_graph_run(beta, full[:n]) for n in steps_list]


def _warm_up(f, x):
    """One untimed make_jaxpr(grad) so that one-time costs of the first trace (JAX's
    internal caches, imports) do not land on the first measured depth."""
    jax.make_jaxpr(jax.grad(f))(jnp.asarray(x, dtype=jnp.float64))


def schedule_prefix(chi, steps, beta):
    """``trg.schedule(chi, steps, beta)``. The schedule of fewer steps is a prefix of a
    longer one, so the longest one computed so far for (chi, beta) is sliced when it
    suffices (one forward pass serves every depth)."""
    longest = _LONGEST.get((chi, float(beta)))
    if longest is None or len(longest) < steps:
        longest = _LONGEST[(chi, float(beta))] = schedule(chi, steps, beta)
    return longest[:steps]


_LONGEST = {}


# --- the minimal chain y <- (y * y) / 2 --------------------------------------------

def chain(y, layers):
    """The seed's minimal reproduction: ``layers`` times y <- (y * y) / 2 (scalar y)."""
    for _ in range(layers):
        y = (y * y) / 2.0
    return y


def chain_run(layers, y0=CHAIN_Y0):
    """make_jaxpr(grad(chain)) for one depth: dict layers, eqns, make_jaxpr_ms, grad."""
    layers = _check_positive_int("layers", layers)
    f = partial(chain, layers=layers)
    x = jnp.asarray(y0, dtype=jnp.float64)
    jaxpr_s, closed = timed(lambda: jax.make_jaxpr(jax.grad(f))(x))
    return {
        "layers": layers,
        "eqns": count_eqns(closed),
        "make_jaxpr_ms": jaxpr_s * 1e3,
        "grad": float(jax.grad(f)(x)),
    }


def chain_runs(layers_list, y0=CHAIN_Y0):
    """``chain_run`` for every depth in layers_list."""
    layers_list = _check_list("layers_list", layers_list)
    _warm_up(partial(chain, layers=1), y0)
    return [chain_run(n, y0) for n in layers_list]


def jaxpr_transform_seconds(beta=0.3, chi=16, max_steps=20):
    """A callable depth -> seconds of make_jaxpr(grad) of the whole TRG graph at that
    depth, depth <= max_steps (for ``trglab.depth_check``)."""
    beta = _check_beta(beta)
    full = schedule_prefix(chi, _check_positive_int("max_steps", max_steps), beta)

    def transform(steps):
        if steps > len(full):
            raise ValueError(f"depth {steps} exceeds max_steps = {len(full)}")
        ks = full[:steps]
        f = partial(lnz_per_site, ks=ks)
        x = jnp.asarray(beta, dtype=jnp.float64)
        t0 = time.perf_counter()
        jax.make_jaxpr(jax.grad(f))(x)
        return time.perf_counter() - t0

    return transform


# --- the fix: staged ------------------------------------------------------------------

def staged_fix(beta, chi, steps, repeat=3, grad_whole=None):
    """Staged gradient (one jax.vjp per step) vs the whole-graph gradient at one depth.

    Returns a dict: steps, lnz, grad_staged, grad_whole, diff (staged - whole),
    staged_first_ms / staged_steady_ms (first call incl. compile of the per-step
    functions; steady = min of ``repeat`` further calls) and, unless ``grad_whole`` is
    given (e.g. from ``whole_graph_run``, which saves compiling the whole graph again),
    whole_first_ms / whole_steady_ms of the jitted whole-graph value_and_grad.
    """
    beta = _check_beta(beta)
    chi = _check_positive_int("chi", chi, 2)
    steps = _check_positive_int("steps", steps)
    repeat = _check_positive_int("repeat", repeat)
    ks = schedule_prefix(chi, steps, beta)
    s_first, s_steady, (lnz, g_staged) = first_and_steady(
        lambda: value_and_grad(beta, ks, method="staged"), repeat=repeat)
    row = {"steps": steps, "lnz": lnz, "grad_staged": g_staged,
           "staged_first_ms": s_first * 1e3, "staged_steady_ms": s_steady * 1e3}
    if grad_whole is None:
        w_first, w_steady, (_, grad_whole) = first_and_steady(
            lambda: value_and_grad(beta, ks, method="whole"), repeat=repeat)
        row.update(whole_first_ms=w_first * 1e3, whole_steady_ms=w_steady * 1e3)
    row["grad_whole"] = float(grad_whole)
    row["diff"] = g_staged - float(grad_whole)
    return row


# --- the program ------------------------------------------------------------------------

def format_trg(row):
    """One line in the seed's format."""
    return (f"trg steps={row['steps']:2d} eqns {row['eqns']} make_jaxpr(grad) {row['make_jaxpr_ms']:.2f} ms "
            f"first jit(grad) call {row['first_jit_ms']:.2f} ms grad={row['grad']:.15f}")


def format_chain(row):
    return (f"mul n={row['layers']:2d} eqns {row['eqns']} make_jaxpr(grad) {row['make_jaxpr_ms']:.2f} ms "
            f"grad={row['grad']:.6e}")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not usage + message
        self.exit(2, f"p25_whole_graph: error: {message}\n")


def main(argv=None):
    p = _Parser(prog="python -m trglab.experiments.p25_whole_graph",
                description="Whole-graph jax.grad through TRG: equations and times per depth.")
    p.add_argument("--steps", type=int, nargs="+", default=[1, 2, 3, 4, 5, 20])
    p.add_argument("--chi", type=int, default=16)
    p.add_argument("--beta", type=float, default=0.3)
    p.add_argument("--chain", type=int, nargs="*", default=[16, 20, 24, 30],
                   help="layers of the minimal chain y <- (y*y)/2 (none: skip)")
    args = p.parse_args(argv)
    try:
        _check_beta(args.beta)
        _check_positive_int("--chi", args.chi, 2)
        _check_list("--steps", args.steps)
        if args.chain:
            _check_list("--chain", args.chain)
    except ValueError as exc:
        p.error(str(exc))
    full = schedule_prefix(args.chi, max(args.steps), args.beta)
    _warm_up(partial(lnz_per_site, ks=full[:1]), args.beta)
    for n in args.steps:
        print(format_trg(whole_graph_run(args.beta, full[:n])), flush=True)
    if args.chain:
        _warm_up(partial(chain, layers=1), CHAIN_Y0)
    for n in args.chain or []:
        print(format_chain(chain_run(n)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())


# --- plots (the notebook calls these; matplotlib figures, log-scale y) -------------------

def _pos(values):
    return [v if (v is not None and v > 0) else float("nan") for v in values]


def plot_jax_steps(rows):
    """Live JAX sweep: make_jaxpr(grad) ms, first jit(grad) ms and equations vs steps."""
    from ..plotting import log_lines

    steps = [r["steps"] for r in rows]
    return log_lines({"make_jaxpr(grad) 时间 (ms)": (steps, [r["make_jaxpr_ms"] for r in rows]),
                      "首次 jit(grad) 调用，含编译 (ms)": (steps, [r["first_jit_ms"] for r in rows]),
                      "make_jaxpr(grad) 方程数": (steps, [r["eqns"] for r in rows])},
                     xlabel="TRG 步数", ylabel="毫秒 / 方程数（对数轴）",
                     title="JAX 整图求导（本次运行）")


def plot_side_by_side(jax_rows, jax_chain_rows, rec_trg_rows, rec_chain_rows):
    """One plot: JAX transform time (linear) vs tenferro ad.grad (recorded: x24 per TRG
    step, x2 per chain layer), against depth (TRG steps or chain layers)."""
    from ..plotting import log_lines

    sweep = [r for r in rec_trg_rows if r["run"] == "sweep" and r["ad_grad_ms"] is not None]
    return log_lines({
        "JAX TRG：make_jaxpr(grad)（本次）": ([r["steps"] for r in jax_rows], [r["make_jaxpr_ms"] for r in jax_rows]),
        "JAX 链 y←(y·y)/2：make_jaxpr(grad)（本次）": ([r["layers"] for r in jax_chain_rows],
                                                   [r["make_jaxpr_ms"] for r in jax_chain_rows]),
        "tenferro TRG：ad.grad（记录）": ([r["n"] for r in sweep], [r["ad_grad_ms"] for r in sweep]),
        "tenferro 链：ad.grad（记录）": ([r["n"] for r in rec_chain_rows], [r["ad_grad_ms"] for r in rec_chain_rows]),
    }, xlabel="深度（TRG 步数，或链的层数）", ylabel="变换时间 (ms，对数轴)",
        title="求导变换的时间：JAX 线性，tenferro 0.8.0 指数")


def plot_model(model_rows, rec_chain_rows):
    """ValueKey model on the chain (naive / interned / memoized transform ms, measured)
    beside tenferro's recorded ad.grad ms of the same chain."""
    from ..plotting import log_lines

    layers = [r["depth"] for r in model_rows]
    series = {f"模型：{label}（本次）": (layers, _pos([r.get(f"{mode}_ms") for r in model_rows]))
              for mode, label in (("naive", "结构递归比较"), ("memoized", "记忆化比较"), ("interned", "驻留键"))}
    series["tenferro ad.grad（记录）"] = ([r["n"] for r in rec_chain_rows], [r["ad_grad_ms"] for r in rec_chain_rows])
    return log_lines(series, xlabel="链的层数 n", ylabel="变换时间 (ms，对数轴)",
                     title="y←(y·y)/2：值键模型与 tenferro")
