"""Shared command line of the experiment modules: --beta, --chi, --steps (and extras)."""

import argparse
import sys


def parse_beta_chi_steps(prog, steps_default, argv=None, repeat_default=None):
    """Parse ``--beta --chi --steps [--repeat]`` for ``python -m trglab.experiments.<prog>``.

    Returns the argparse namespace, or None after printing a one-line error to stderr when
    beta <= 0, chi < 2, a step count < 1 (or repeat < 1); callers then exit with 2.
    """
    p = argparse.ArgumentParser(prog=f"python -m trglab.experiments.{prog}")
    p.add_argument("--beta", type=float, default=0.3)
    p.add_argument("--chi", type=int, default=16)
    p.add_argument("--steps", type=int, nargs="+", default=list(steps_default))
    if repeat_default is not None:
        p.add_argument("--repeat", type=int, default=repeat_default)
    args = p.parse_args(argv)
    bad = args.beta <= 0 or args.chi < 2 or min(args.steps) < 1
    if repeat_default is not None:
        bad = bad or args.repeat < 1
        need = "beta > 0, chi >= 2, steps >= 1 and repeat >= 1"
    else:
        need = "beta > 0, chi >= 2 and steps >= 1"
    if bad:
        print(f"error: need {need}", file=sys.stderr)
        return None
    return args
