"""The pitfall page "eager 还是 traced": op by op, or one compiled program?

    python -m trglab.experiments.eager_traced --steps 4 5 20

For the whole-graph ``value_and_grad`` of ln Z/N at a given depth, three timings:
op by op (no ``jit``: every primitive dispatched on its own, the gradient traced anew on
every call), the first ``jit`` call split into trace (lower), compile and run, and the
``jit`` steady state. All timings wait for the result (``block_until_ready``).
"""

import math
import sys
import time
from functools import partial

import jax
import jax.numpy as jnp

from ..grads import value_and_grad
from ..timing import timed
from ..trg import lnz_per_site, schedule, validate_schedule
from ._cli import parse_beta_chi_steps


def mode_run(beta, ks, repeat=2):
    """Timings (ms) of the three modes at schedule ks, and their gradients.

    Returns a dict: steps, eager_first_ms, eager_steady_ms (min over ``repeat`` further
    calls), jit_trace_ms (tracing + lowering), jit_compile_ms, jit_first_ms (trace +
    compile + first run), jit_steady_ms (min over ``repeat`` calls), grad_eager,
    grad_jit.
    """
    ks = validate_schedule(ks)
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    b = jnp.asarray(beta, dtype=jnp.float64)
    eager = jax.value_and_grad(partial(lnz_per_site, ks=ks))
    e_first, (_, g_eager) = timed(eager, b)
    e_steady = min(timed(eager, b)[0] for _ in range(repeat))
    t0 = time.perf_counter()
    lowered = jax.jit(jax.value_and_grad(partial(lnz_per_site, ks=ks))).lower(b)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    run, (_, g_jit) = timed(compiled, b)
    j_steady = min(timed(compiled, b)[0] for _ in range(repeat))
    return {"steps": len(ks), "eager_first_ms": e_first * 1e3, "eager_steady_ms": e_steady * 1e3,
            "jit_trace_ms": (t1 - t0) * 1e3, "jit_compile_ms": (t2 - t1) * 1e3,
            "jit_first_ms": (t2 - t0 + run) * 1e3, "jit_steady_ms": j_steady * 1e3,
            "grad_eager": float(g_eager), "grad_jit": float(g_jit)}


def mode_runs(beta, chi, steps_list, repeat=2):
    """``mode_run`` for every depth in steps_list (ascending), schedule(chi, depth)."""
    return [mode_run(beta, schedule(chi, n, beta), repeat) for n in sorted(steps_list)]


def break_even_calls(row):
    """Smallest number of calls N for which jit (first + (N-1) steady) is cheaper than N
    eager calls (break-even: equal at N); None if eager is never slower per call."""
    per_call_gain = row["eager_steady_ms"] - row["jit_steady_ms"]
    if per_call_gain <= 0:
        return None
    return max(1, math.ceil((row["jit_first_ms"] - row["jit_steady_ms"]) / per_call_gain))


def staged_eager_vs_jit(beta, ks):
    """Gradient of the staged method op by op and with per-step jit (floats): the staged
    method runs in either mode and gives the same number."""
    return value_and_grad(beta, ks, method="staged", jit=False)[1], value_and_grad(beta, ks, method="staged", jit=True)[1]


def main(argv=None):
    args = parse_beta_chi_steps("eager_traced", [4, 5, 20], argv, repeat_default=2)
    if args is None:
        return 2
    for r in mode_runs(args.beta, args.chi, args.steps, args.repeat):
        print(f"steps={r['steps']:2d} eager {r['eager_steady_ms']:.1f} ms | jit first {r['jit_first_ms']:.1f} ms "
              f"(trace {r['jit_trace_ms']:.1f}, compile {r['jit_compile_ms']:.1f}) | jit steady {r['jit_steady_ms']:.2f} ms "
              f"| grad {r['grad_jit']:.15f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
