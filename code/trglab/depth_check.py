"""怎么确认没中招: measure a transform one step (layer) deeper at a time.

``depth_check(cost, depths)`` calls ``cost(depth)`` for each depth (a callable that runs
the transform at that depth and returns its cost: seconds, or an exact count such as the
number of key comparisons), keeps the minimum of ``repeat`` calls, and looks at the
growth *per added step*:

    r_i = (c_{i+1} / c_i) ** (1 / (d_{i+1} - d_i))

(for consecutive depths simply c_{i+1} / c_i).

Verdict: "exponential" when the median of the last ``tail`` per-step ratios is at least
``threshold`` (default 1.8), else "ok". Why this separates the two cleanly and is robust
to noise:

- linear growth c = a + b d gives r = (a + b (d + 1)) / (a + b d) <= (d + 1) / d,
  at most 1.5 from depth 2 on and falling towards 1;
- doubling per step gives r -> 2 (the seed's "ratio steadily >= 2"); the small constant
  overhead of a real measurement pulls the first ratios a little under 2, hence 1.8;
- the minimum of repeats removes slow outliers (another process took the CPU), and the
  median of the last ratios ignores one remaining bad point.

Costs below ``floor`` (default 1e-4 s; use 0 for exact counts) are too small to time and
are left out of the ratios; with fewer than 2 usable ratios the verdict is "ok" with a
note that nothing could be told.
"""

import statistics
from dataclasses import dataclass, field

EXPONENTIAL, OK = "exponential", "ok"


@dataclass
class DepthReport:
    depths: list
    costs: list
    ratios: list  # per added step, one per consecutive pair of depths (None if below floor)
    median_tail: float | None
    threshold: float
    verdict: str
    note: str = ""
    rows: list = field(default_factory=list)

    def summary(self):
        med = "n/a" if self.median_tail is None else f"{self.median_tail:.2f}"
        return f"{self.verdict}: median per-step ratio of the last depths {med} (threshold {self.threshold})"


def step_ratios(depths, costs, floor=0.0):
    """Per-added-step ratios (c_{i+1}/c_i)^(1/(d_{i+1}-d_i)); None where a cost <= floor."""
    if len(depths) != len(costs):
        raise ValueError(f"{len(depths)} depths but {len(costs)} costs")
    out = []
    for (d0, c0), (d1, c1) in zip(zip(depths, costs), zip(depths[1:], costs[1:])):
        if d1 <= d0:
            raise ValueError(f"depths must increase, got {d0} then {d1}")
        if c0 is None or c1 is None or c0 <= floor or c1 <= floor:
            out.append(None)
        else:
            out.append((c1 / c0) ** (1.0 / (d1 - d0)))
    return out


def verdict_from_ratios(ratios, threshold=1.8, tail=3):
    """(verdict, median of the last ``tail`` usable ratios or None, note)."""
    usable = [r for r in ratios if r is not None]
    if len(usable) < 2:
        return OK, None, "fewer than 2 usable ratios: costs too small to tell (use deeper depths)"
    med = statistics.median(usable[-tail:])
    return (EXPONENTIAL if med >= threshold else OK), med, ""


def depth_check(cost, depths, repeat=3, threshold=1.8, tail=3, floor=1e-4):
    """Run ``cost(depth)`` for each depth (min of ``repeat`` calls) and judge the growth.

    cost: callable depth -> non-negative number (seconds or an exact count).
    depths: strictly increasing ints >= 1, at least 3 of them.
    Returns a DepthReport (``.rows`` is a table: depth, cost, ratio per added step).
    """
    depths = list(depths)
    if len(depths) < 3:
        raise ValueError(f"depth_check needs at least 3 depths, got {depths!r}")
    for d in depths:
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"depths must be ints >= 1, got {d!r}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be an int >= 1, got {repeat!r}")
    if not threshold > 1:
        raise ValueError(f"threshold must be > 1, got {threshold!r}")
    costs = []
    for d in depths:
        c = min(float(cost(d)) for _ in range(repeat))
        if c < 0:
            raise ValueError(f"cost({d}) is negative: {c}")
        costs.append(c)
    ratios = step_ratios(depths, costs, floor)
    verdict, med, note = verdict_from_ratios(ratios, threshold, tail)
    rows = [{"depth": d, "cost": c, "ratio": (None if i == 0 else ratios[i - 1])}
            for i, (d, c) in enumerate(zip(depths, costs))]
    return DepthReport(depths, costs, ratios, med, threshold, verdict, note, rows)
