"""``python -m trglab trg``: ln Z/N, u (and c) of the Ising model from the command line.

    python -m trglab trg --beta 0.3 --chi 16 --steps 20 [--method staged] [--c] [--json]
    python -m trglab trg --beta 0.3 --ks 2,4,4,16,16

Bad input (beta <= 0, chi < 2, steps < 1, a malformed schedule) prints one line on
stderr and exits with status 2.
"""

import json
import math
import sys
import time

from .grads import METHODS, specific_heat_fd, value_and_grad
from .trg import schedule, validate_schedule


class UsageError(ValueError):
    """Bad command-line input: printed as one line, exit status 2."""


def add_arguments(parser):
    parser.add_argument("--beta", type=str, default="0.3", help="inverse temperature (> 0)")
    parser.add_argument("--chi", type=str, default="16", help="bond dimension cap (>= 2)")
    parser.add_argument("--steps", type=str, default="20", help="TRG steps (>= 1)")
    parser.add_argument("--ks", type=str, default=None, help="explicit schedule, e.g. 2,4,4,16 (overrides --steps)")
    parser.add_argument("--method", default="staged", help=f"one of {', '.join(METHODS)}")
    parser.add_argument("--no-jit", action="store_true", help="run op by op")
    parser.add_argument("--c", action="store_true", help="also the specific heat (central difference, h = 1e-5)")
    parser.add_argument("--h", type=str, default="1e-5", help="step of the central difference")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _number(text, name, cast):
    try:
        value = cast(text)
    except (TypeError, ValueError):
        raise UsageError(f"--{name} must be a {'number' if cast is float else 'integer'}, got {text!r}") from None
    if cast is float and not math.isfinite(value):
        raise UsageError(f"--{name} must be finite, got {text!r}")
    return value


def parse_schedule(text):
    """'2,4,4,16' -> (2, 4, 4, 16); UsageError when malformed."""
    parts = [p.strip() for p in text.split(",")]
    if not parts or any(p == "" for p in parts):
        raise UsageError(f"--ks must be comma-separated positive integers, got {text!r}")
    try:
        ks = [int(p) for p in parts]
    except ValueError:
        raise UsageError(f"--ks must be comma-separated positive integers, got {text!r}") from None
    try:
        return validate_schedule(ks)
    except ValueError as exc:
        raise UsageError(f"--ks: {exc}") from None


def resolve(args):
    """Validated (beta, chi, ks, method, h) from parsed arguments."""
    beta = _number(args.beta, "beta", float)
    if beta <= 0:
        raise UsageError(f"--beta must be > 0, got {args.beta}")
    chi = _number(args.chi, "chi", int)
    if chi < 2:
        raise UsageError(f"--chi must be >= 2, got {args.chi}")
    if args.method not in METHODS:
        raise UsageError(f"--method must be one of {', '.join(METHODS)}, got {args.method!r}")
    h = _number(args.h, "h", float)
    if not 0 < h < beta:
        raise UsageError(f"--h must be in (0, beta), got {args.h}")
    if args.ks is not None:
        ks = parse_schedule(args.ks)
        if max(ks) > chi:
            raise UsageError(f"--ks entry {max(ks)} exceeds --chi {chi}")
    else:
        steps = _number(args.steps, "steps", int)
        if steps < 1:
            raise UsageError(f"--steps must be >= 1, got {args.steps}")
        ks = schedule(chi, steps, beta)
    return beta, chi, ks, args.method, h


def run(args, out=sys.stdout):
    """Compute and print; returns the exit status."""
    beta, chi, ks, method, h = resolve(args)
    jit = not args.no_jit
    t0 = time.perf_counter()
    lnz, grad = value_and_grad(beta, ks, method=method, jit=jit)
    seconds = time.perf_counter() - t0
    result = {"ks": list(ks), "lnz_per_site": lnz, "u": -grad, "method": method, "seconds": seconds}
    if args.c:
        t1 = time.perf_counter()
        result["c"] = specific_heat_fd(beta, ks, h=h, method=method, jit=jit)
        result["c_seconds"] = time.perf_counter() - t1
    if args.json:
        print(json.dumps(result), file=out)
        return 0
    print(f"trglab trg beta={beta} chi={chi} steps={len(ks)} method={method} jit={jit}", file=out)
    print(f"ks={list(ks)}", file=out)
    print(f"lnZ/N = {lnz:.15f}", file=out)
    print(f"u     = {-grad:.15f}", file=out)
    if "c" in result:
        print(f"c     = {result['c']:.12f}   (central difference, h={h:g}, {result['c_seconds']:.2f} s)", file=out)
    print(f"value_and_grad {seconds * 1e3:.1f} ms (first call, compile included)", file=out)
    return 0
