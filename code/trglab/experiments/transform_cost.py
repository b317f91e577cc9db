"""The pitfall page "求导变换的代价": where the time of the transform goes, with evidence.

    python -m trglab.experiments.transform_cost --program chain --depths 10 12 14 16

Profiles the executable key model ``trglab.models.valuekey`` (naive / interned /
memoized equality of value keys, after computegraph-rs ``src/types.rs``) with cProfile,
counts structural comparisons per depth, and measures what a fix costs at construction.
"""

import argparse
import cProfile
import pstats
import sys
import time

from ..depth_check import depth_check
from ..models import valuekey as vk

EQ_FUNCTIONS = ("__eq__", "value_eq", "op_eq")


def profile_transform(program, depth, mode="naive", top=6):
    """cProfile one ``valuekey.transform`` run.

    Returns (result, rows, eq_share): the TransformResult; the ``top`` functions by
    internal time as dicts (function, calls, primitive_calls, tottime_ms, cumtime_ms);
    and the share of the profiled time spent below ``ValueKey.__eq__`` (key equality,
    recursion included), a float in [0, 1].
    """
    prof = cProfile.Profile()
    prof.enable()
    result = vk.transform(program, depth, mode)
    prof.disable()
    stats = pstats.Stats(prof)
    total = stats.total_tt
    rows = []
    eq_cum = 0.0
    for (path, line, name), (cc, nc, tt, ct, _callers) in stats.stats.items():
        if name == "__eq__" and path.endswith("valuekey.py"):
            eq_cum += ct
        rows.append({"function": f"{name} ({path.rsplit('/', 1)[-1]}:{line})", "calls": nc,
                     "primitive_calls": cc, "tottime_ms": tt * 1e3, "cumtime_ms": ct * 1e3})
    rows.sort(key=lambda r: r["tottime_ms"], reverse=True)
    return result, rows[:top], (eq_cum / total if total > 0 else 0.0)


def eq_time_share(rows_all):
    """Share of internal time spent in the equality functions (value_eq, op_eq, __eq__)."""
    total = sum(r["tottime_ms"] for r in rows_all)
    eq = sum(r["tottime_ms"] for r in rows_all if r["function"].split(" ")[0] in EQ_FUNCTIONS)
    return eq / total if total else 0.0


def comparison_rows(program, depths, cap_s=None):
    """``valuekey.transform_table`` plus the predicted naive count and the per-layer ratio
    of naive comparisons (None for the first depth)."""
    rows = vk.transform_table(program, depths, cap_s=cap_s)
    prev = None
    for r in rows:
        r["naive_predicted"] = vk.naive_comparisons(program, r["depth"])
        c = r.get("naive_comparisons")
        r["naive_ratio"] = (c / prev) ** (1.0 / (r["depth"] - prev_d)) if (prev and c) else None
        prev, prev_d = (c, r["depth"]) if c else (None, r["depth"])
    return rows


def build_seconds(program, depth, mode, repeat=3):
    """Time to build the program's key graph once in ``mode`` (min of ``repeat``): the
    cost a fix moves to construction (interning looks every new key up in a table)."""
    _, fn = vk._program(program) if not callable(program) else (None, program)
    best = float("inf")
    for _ in range(repeat):
        model = vk.KeyModel(mode)
        b = model.builder()
        t0 = time.perf_counter()
        fn(b, depth)
        best = min(best, time.perf_counter() - t0)
    return best


def fix_cost_rows(program, depths, modes=("naive", "interned", "memoized")):
    """Per depth and mode: build time (ms) and lookup time (ms) of the transform."""
    rows = []
    for d in depths:
        row = {"depth": d}
        for m in modes:
            row[f"{m}_build_ms"] = build_seconds(program, d, m) * 1e3
            row[f"{m}_lookup_ms"] = vk.transform(program, d, m).seconds * 1e3
        rows.append(row)
    return rows


def depth_verdicts(program, depths, modes=("naive", "memoized"), cost="comparisons", repeat=1):
    """``depth_check`` per mode: {mode: DepthReport}.

    cost "comparisons": the exact number of structural comparisons (no timing noise;
    interned keys need none at all, so that mode has nothing to judge); "seconds": the
    lookup time (too small to time below ~0.1 ms, see ``depth_check``'s floor).
    """
    if cost == "comparisons":
        fn, floor = (lambda d, m: vk.transform(program, d, m).op_comparisons), 0.0
    elif cost == "seconds":
        fn, floor = (lambda d, m: vk.transform(program, d, m).seconds), 1e-4
    else:
        raise ValueError(f"cost must be 'comparisons' or 'seconds', got {cost!r}")
    return {m: depth_check(lambda d, m=m: fn(d, m), depths, repeat=repeat, floor=floor) for m in modes}


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m trglab.experiments.transform_cost")
    p.add_argument("--program", choices=sorted(vk.PROGRAMS), default="chain")
    p.add_argument("--depths", type=int, nargs="+", default=[10, 12, 14, 16])
    args = p.parse_args(argv)
    if min(args.depths) < 1:
        print("error: depths must be >= 1", file=sys.stderr)
        return 2
    for r in comparison_rows(args.program, sorted(args.depths)):
        print(f"{args.program} depth={r['depth']:2d} naive {r['naive_comparisons']} comparisons "
              f"({r['naive_ms']:.2f} ms) | interned {r['interned_comparisons']} | memoized {r['memoized_comparisons']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
