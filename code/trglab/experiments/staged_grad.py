"""The mainline page "分段求导得内能": staged vs whole-graph gradient, time and memory.

    python -m trglab.experiments.staged_grad --beta 0.3 --chi 16 --steps 1 2 5 20

The staged method itself lives in ``trglab.grads`` (``staged_forward``,
``staged_backward``); this module only measures it against the whole graph.
"""

import sys
import time
from functools import lru_cache, partial

import jax
import jax.numpy as jnp

from ..grads import _apply_vjp_jit, _step_forward_jit, staged_forward, value_and_grad
from ..memory import compiled_bytes, tree_bytes
from ..timing import first_and_steady, timed
from ..trg import lnz_per_site, schedule, validate_schedule
from ._cli import parse_beta_chi_steps


def _whole_run(beta, ks, repeat):
    """Whole graph through one AOT-compiled program: timings, result and its memory."""
    b = jnp.asarray(beta, dtype=jnp.float64)
    t0 = time.perf_counter()
    compiled = jax.jit(jax.value_and_grad(partial(lnz_per_site, ks=ks))).lower(b).compile()
    compile_s = time.perf_counter() - t0
    run_s, (lnz, g) = timed(compiled, b)
    steady = min(timed(compiled, b)[0] for _ in range(repeat))
    mem = compiled.memory_analysis()
    peak = mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
    return {"lnz_whole": float(lnz), "grad_whole": float(g), "whole_compile_ms": compile_s * 1e3,
            "whole_first_ms": (compile_s + run_s) * 1e3, "whole_steady_ms": steady * 1e3,
            "whole_peak_bytes": int(peak)}


@lru_cache(maxsize=None)
def _step_program_bytes(k, shape):
    """Largest per-step program of the staged method for input shape (D,)*4 and k:
    forward (argument + temp + output, the output holding the vjp residuals) or backward."""
    t = jnp.zeros(shape)
    fwd = compiled_bytes(_step_forward_jit(k), t)
    _, _, vjp = _step_forward_jit(k)(t)
    bwd = compiled_bytes(_apply_vjp_jit, vjp, (jnp.zeros((k,) * 4), jnp.asarray(1.0)))
    return max(fwd["peak"], bwd["peak"])


def _staged_peak(beta, ks):
    """Residuals held between forward and backward (measured) + largest per-step program."""
    _, vjps, site_vjp, trace_vjp = staged_forward(beta, ks)
    held = tree_bytes((vjps, site_vjp, trace_vjp))
    shapes, d = [], 2
    for k in ks:
        shapes.append((k, (d,) * 4))
        d = k
    return held + max(_step_program_bytes(k, sh) for k, sh in shapes), held


def compare_run(beta, ks, repeat=3):
    """Whole graph vs staged at one schedule ks (both jit).

    Returns a dict: steps, lnz/grad of both, diff = grad_staged - grad_whole, timings in ms
    (whole: compile, first = compile + first run, steady = min of ``repeat`` runs;
    staged: first call incl. tracing and compiling its per-step programs, steady), and
    peak memory in bytes (whole: XLA buffer assignment of its one program; staged:
    residuals held by the vjp closures + its largest per-step program).
    """
    ks = validate_schedule(ks)
    out = {"steps": len(ks)}
    out.update(_whole_run(beta, ks, repeat))
    first, steady, (lnz, g) = first_and_steady(lambda: value_and_grad(beta, ks, method="staged"), repeat=repeat)
    out.update(lnz_staged=lnz, grad_staged=g, staged_first_ms=first * 1e3, staged_steady_ms=steady * 1e3)
    out["staged_peak_bytes"], out["staged_residual_bytes"] = _staged_peak(beta, ks)
    out["diff"] = out["grad_staged"] - out["grad_whole"]
    return out


def compare_runs(beta, chi, steps_list, repeat=3):
    """``compare_run`` for every depth in steps_list (ascending), schedule(chi, depth)."""
    return [compare_run(beta, schedule(chi, n, beta), repeat) for n in sorted(steps_list)]


def bytes_per_step(rows, key):
    """[(value at depth n) / n for each row]: flat for memory linear in the depth."""
    return [r[key] / r["steps"] for r in rows]


def main(argv=None):
    args = parse_beta_chi_steps("staged_grad", [1, 2, 5, 20], argv)
    if args is None:
        return 2
    for r in compare_runs(args.beta, args.chi, args.steps):
        print(f"steps={r['steps']:2d} grad whole={r['grad_whole']:.15f} staged={r['grad_staged']:.15f} "
              f"diff={r['diff']:.1e} | whole {r['whole_first_ms']:.0f}/{r['whole_steady_ms']:.1f} ms, "
              f"staged {r['staged_first_ms']:.0f}/{r['staged_steady_ms']:.1f} ms (first/steady)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
