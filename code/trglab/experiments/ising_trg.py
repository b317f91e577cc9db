"""The hands-on page "Ising 模型的 TRG": staged value and gradient at a few depths.

    python -m trglab.experiments.ising_trg --beta 0.3 --chi 16 --steps 5 20
"""

import sys

from ..grads import specific_heat_fd, value_and_grad
from ..timing import first_and_steady
from ..trg import schedule
from ._cli import parse_beta_chi_steps


def staged_run(beta, chi, steps, repeat=3):
    """One depth: schedule, ln Z/N, grad, u and timings of the staged value-and-grad.

    Returns a dict with keys steps, ks, lnz, grad, u, first_ms (trace + compile + run)
    and steady_ms (minimum of ``repeat`` further calls).
    """
    ks = schedule(chi, steps, beta)
    first, steady, (lnz, grad) = first_and_steady(lambda: value_and_grad(beta, ks, method="staged"), repeat=repeat)
    return {"steps": steps, "ks": list(ks), "lnz": lnz, "grad": grad, "u": -grad,
            "first_ms": first * 1e3, "steady_ms": steady * 1e3}


def staged_runs(beta, chi, steps_list, repeat=3):
    """``staged_run`` for every depth in steps_list (ascending)."""
    return [staged_run(beta, chi, n, repeat) for n in sorted(steps_list)]


def specific_heat(beta, chi, steps, h=1e-5):
    """c = beta^2 d^2(ln Z/N)/d beta^2 as the central difference of two staged gradients."""
    return specific_heat_fd(beta, schedule(chi, steps, beta), h=h, method="staged")


def main(argv=None):
    args = parse_beta_chi_steps("ising_trg", [5, 20], argv)
    if args is None:
        return 2
    for r in staged_runs(args.beta, args.chi, args.steps):
        print(f"jax staged chi={args.chi} steps={r['steps']} ks={r['ks']}")
        print(f"beta={args.beta:.4f} lnZ/N={r['lnz']:.15f} u={r['u']:.15f} | value_and_grad "
              f"first {r['first_ms']:.1f} ms, steady {r['steady_ms']:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
