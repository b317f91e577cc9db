"""The page "跨过相变": TRG against Onsager across beta_c, chi and step convergence.

    python -m trglab.experiments.transition --chi 8 16 24 --steps 20 --points 7 --dense-points 8

Every point is one run of a compiled forward-over-forward program
(``second_order.derivatives_by_depth``) that returns ln Z/N, u = -d(ln Z/N)/d beta and
c = beta^2 d^2(ln Z/N)/d beta^2 after *every* step 1..steps, so the scan over beta gives the
convergence in steps at no extra cost. One program is compiled per (chi, schedule) and
reused for all betas of that chi.

The truncation schedule (``trg.schedule``) is computed once per chi, by a forward pass at
``schedule_beta`` (default beta_c). Its entries are min(chi, numerical rank) and the ranks
of the first steps (2, 4, 4, 16) come from the structure of the Ising tensor, not from the
value of beta; ``tests/test_transition.py`` checks that the schedule at the ends of the
default range equals the one at beta_c. A kept zero singular value would show up as a
non-finite u or c, which ``scan`` refuses (ValueError).

Nothing is cached on disk; compiled programs are kept in this process only.
"""

import argparse
import math
import sys
import time
import warnings

import numpy as np

from .. import onsager
from ..second_order import derivatives_by_depth
from ..trg import schedule

BETA_C = onsager.BETA_C
QUANTITIES = ("lnz", "u", "c")
NAMES = {"lnz": "ln Z/N", "u": "u", "c": "c"}


# --- parameters -------------------------------------------------------------------------

def _check_positive_int(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def _check_chi_list(chi_list):
    if not isinstance(chi_list, (list, tuple)) or not chi_list:
        raise ValueError(f"chi_list must be a non-empty list of ints >= 2, got {chi_list!r}")
    for chi in chi_list:
        _check_positive_int("every chi", chi, 2)


def beta_grid(beta_min=0.30, beta_max=0.60, points=7, dense_points=8, dense_width=0.02):
    """Sorted betas: ``points`` evenly over [beta_min, beta_max] plus ``dense_points`` evenly
    over [beta_c - dense_width, beta_c + dense_width] at half-step offsets, so that beta_c
    itself (where c diverges) is never a grid point. Values rounded to 12 decimals.

    Returns a list of floats.
    """
    if not (beta_min > 0 and beta_max > beta_min):
        raise ValueError(f"need 0 < beta_min < beta_max, got beta_min={beta_min!r}, beta_max={beta_max!r}")
    _check_positive_int("points", points, 2)
    if isinstance(dense_points, bool) or not isinstance(dense_points, (int, np.integer)) or dense_points < 0:
        raise ValueError(f"dense_points must be an int >= 0, got {dense_points!r}")
    if dense_points and not dense_width > 0:
        raise ValueError(f"dense_width must be positive, got {dense_width!r}")
    betas = list(np.linspace(beta_min, beta_max, points))
    if dense_points:
        step = 2.0 * dense_width / dense_points
        betas += [BETA_C - dense_width + (j + 0.5) * step for j in range(dense_points)]
    out = sorted({round(float(b), 12) for b in betas if beta_min <= b <= beta_max})
    return [b for b in out if abs(b - BETA_C) > 1e-9]


def schedules(chi_list, steps, schedule_beta=BETA_C):
    """{chi: ks}: one static truncation schedule per chi, computed at ``schedule_beta``."""
    _check_chi_list(chi_list)
    _check_positive_int("steps", steps)
    return {chi: schedule(chi, steps, float(schedule_beta)) for chi in chi_list}


# --- exact values and errors ----------------------------------------------------------

def exact(beta):
    """Onsager's (ln Z/N, u, c) as a dict; c is None within 1e-9 of beta_c (divergent)."""
    lnz, u, c = onsager.exact(beta)
    return {"lnz": lnz, "u": u, "c": None if abs(beta - BETA_C) < 1e-9 else c}


def rel_error(value, reference):
    """|value - reference| / |reference|; None when there is no finite reference."""
    if reference is None or not math.isfinite(reference) or reference == 0:
        return None
    return abs(value - reference) / abs(reference)


def point(beta, chi, ks, reuse=True):
    """TRG against Onsager at one beta with schedule ks (chi only labels the row).

    ``reuse``: take the point from an earlier run in this process if there is one
    (``second_order.derivatives_by_depth``); ``scan`` passes False, since it times them.

    Returns a dict: chi, beta, ks, lnz, u, c (after all steps), by_depth (dict of lists
    lnz/u/c after every step), exact_lnz, exact_u, exact_c, err_lnz, err_u, err_c
    (relative errors, None where undefined). Raises ValueError on a non-finite result.
    """
    d = derivatives_by_depth(beta, ks, reuse=reuse)
    ref = exact(beta)
    row = {"chi": chi, "beta": beta, "ks": list(ks)}
    for q in QUANTITIES:
        v = d[q][-1]
        if not math.isfinite(v):
            raise ValueError(f"non-finite {NAMES[q]} = {v} at beta = {beta}, chi = {chi}, ks = {list(ks)}")
        row[q] = v
    row["by_depth"] = {q: d[q] for q in QUANTITIES}
    for q in QUANTITIES:
        row[f"exact_{q}"] = ref[q]
        row[f"err_{q}"] = rel_error(row[q], ref[q])
    return row


def scan(betas, chi_list, steps, schedule_beta=BETA_C, progress=True, reuse=False):
    """TRG (every chi in chi_list, ``steps`` steps) against Onsager at every beta.

    Returns (rows, timing): rows as in ``point`` ordered by chi then beta; timing is a list
    of dicts chi, ks, first_s (first point: trace + compile + run), run_s (mean of the other
    points; None if there is only one), points. ``reuse`` as in ``point`` (default False:
    every point is run, so the timings are real).
    """
    _check_chi_list(chi_list)
    betas = [float(b) for b in betas]
    if not betas or any(not (b > 0 and math.isfinite(b)) for b in betas):
        raise ValueError(f"betas must be a non-empty list of positive numbers, got {betas!r}")
    with warnings.catch_warnings():  # no ipywidgets: tqdm.auto falls back to text, say nothing
        warnings.simplefilter("ignore")
        from tqdm.auto import tqdm

    ks_of = schedules(chi_list, steps, schedule_beta)
    rows, timing = [], []
    bar = tqdm(total=len(chi_list) * len(betas), desc="beta scan", disable=not progress)
    try:
        for chi in chi_list:
            ks = ks_of[chi]
            times = []
            for beta in betas:
                bar.set_postfix(chi=chi, beta=f"{beta:.4f}")
                t0 = time.perf_counter()
                rows.append(point(beta, chi, ks, reuse=reuse))
                times.append(time.perf_counter() - t0)
                bar.update(1)
            rest = times[1:]
            timing.append({"chi": chi, "ks": list(ks), "first_s": times[0],
                           "run_s": sum(rest) / len(rest) if rest else None, "points": len(betas)})
    finally:
        bar.close()
    return rows, timing


# --- reading the scan -----------------------------------------------------------------

def select(rows, chi):
    """The rows of one chi, ordered by beta."""
    return sorted((r for r in rows if r["chi"] == chi), key=lambda r: r["beta"])


def at(rows, chi, beta, tol=1e-9):
    """The row of (chi, beta); KeyError if the scan has no such point."""
    for r in rows:
        if r["chi"] == chi and abs(r["beta"] - beta) < tol:
            return r
    raise KeyError(f"no scan point at chi = {chi}, beta = {beta}")


def parabola_peak(x, y):
    """Vertex (x_peak, y_peak) of the parabola through the largest y and its two neighbours.

    x ascending, len >= 3. If the maximum is at an end of the grid, returns that grid point
    (the peak is not bracketed).
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.size < 3:
        raise ValueError("need at least 3 points to locate a peak")
    i = int(np.argmax(y))
    if i == 0 or i == x.size - 1:
        return float(x[i]), float(y[i])
    x0, x1, x2 = x[i - 1:i + 2]
    y0, y1, y2 = y[i - 1:i + 2]
    # Newton form of the interpolating parabola: y = y0 + a (x - x0) + b (x - x0)(x - x1)
    a = (y1 - y0) / (x1 - x0)
    b = ((y2 - y1) / (x2 - x1) - a) / (x2 - x0)
    xp = min(max(0.5 * (x0 + x1) - a / (2.0 * b), x0), x2)  # stay inside the bracket
    yp = y0 + a * (xp - x0) + b * (xp - x0) * (xp - x1)
    return float(xp), float(yp)


def peaks(rows, chi_list, window=None):
    """Per chi: beta and c at the peak of c (parabola through the top three grid points),
    the grid maximum, and the distance of the peak from beta_c. List of dicts.

    ``window`` = (lo, hi) restricts the search to lo <= beta <= hi (e.g. the dense region
    around beta_c), so that an isolated spike elsewhere is not taken for the peak.
    """
    out = []
    for chi in chi_list:
        rs = select(rows, chi)
        if window is not None:
            rs = [r for r in rs if window[0] <= r["beta"] <= window[1]]
        xs = [r["beta"] for r in rs]
        cs = [r["c"] for r in rs]
        xp, cp = parabola_peak(xs, cs)
        i = int(np.argmax(cs))
        out.append({"chi": chi, "beta_peak": xp, "c_peak": cp, "grid_beta": xs[i], "grid_c": cs[i],
                    "shift": xp - BETA_C})
    return out


def error_table(rows, chi_list, named_betas):
    """Relative errors of ln Z/N, u, c at named betas for every chi (list of dicts)."""
    out = []
    for beta in named_betas:
        for chi in chi_list:
            r = at(rows, chi, beta)
            out.append({"beta": beta, "chi": chi, "lnz": r["lnz"], "err_lnz": r["err_lnz"], "u": r["u"],
                        "err_u": r["err_u"], "c": r["c"], "exact_c": r["exact_c"], "err_c": r["err_c"]})
    return out


# --- convergence at fixed beta ----------------------------------------------------------

def convergence_in_steps(beta, chi, steps, schedule_beta=BETA_C):
    """ln Z/N, u, c after every step 1..steps at one beta and chi, with relative errors.

    Returns a list of dicts: steps, k (truncation of that step), lnz, u, c, err_lnz, err_u,
    err_c (err_c None at beta_c).
    """
    ks = schedules([chi], steps, schedule_beta)[chi]
    r = point(beta, chi, ks)
    ref = exact(beta)
    out = []
    for i in range(steps):
        row = {"steps": i + 1, "k": ks[i]}
        for q in QUANTITIES:
            v = r["by_depth"][q][i]
            row[q] = v
            row[f"err_{q}"] = rel_error(v, ref[q])
        out.append(row)
    return out


def convergence_in_chi(beta, chi_list, steps, schedule_beta=BETA_C, progress=True):
    """ln Z/N, u, c after ``steps`` steps for every chi at one beta (list of dicts as ``point``).

    Points already run in this process (e.g. by ``scan``) are reused, not run again.
    """
    rows, _ = scan([beta], chi_list, steps, schedule_beta=schedule_beta, progress=progress,
                   reuse=True)
    return rows


# --- plots ------------------------------------------------------------------------------

def _axes(ax=None, figsize=(6.4, 4.0)):
    import matplotlib.pyplot as plt

    try:
        from ..plotting import setup_fonts

        setup_fonts()
    except ImportError:
        pass
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize)
        return fig, ax
    return ax.figure, ax


def _onsager_curve(betas, q, n=400):
    lo, hi = min(betas), max(betas)
    xs = np.linspace(lo, hi, n)
    xs = xs[np.abs(xs - BETA_C) > 1e-6]
    f = {"lnz": onsager.lnz_per_site, "u": onsager.energy_per_site, "c": onsager.specific_heat}[q]
    return xs, np.asarray(f(xs))


def plot_quantity(rows, chi_list, q, ax=None):
    """TRG points of quantity q ('lnz', 'u' or 'c') for every chi, Onsager as a line."""
    fig, ax = _axes(ax)
    betas = sorted({r["beta"] for r in rows})
    xs, ys = _onsager_curve(betas, q)
    ax.plot(xs, ys, "k-", lw=1.2, label="Onsager")
    markers = "os^dvx+*"
    for j, chi in enumerate(chi_list):
        rs = select(rows, chi)
        ax.plot([r["beta"] for r in rs], [r[q] for r in rs], markers[j % len(markers)], ms=4,
                mfc="none", label=f"TRG χ={chi}")
    ax.axvline(BETA_C, color="gray", ls=":", lw=1)
    ax.set_xlabel("β")
    ax.set_ylabel(NAMES[q])
    ax.legend(fontsize=8)
    return fig


def plot_errors(rows, chi_list, quantities=QUANTITIES, axes=None):
    """Relative error |TRG - Onsager| / |Onsager| against beta, log scale, one panel per quantity."""
    import matplotlib.pyplot as plt

    _axes(ax=None) if axes is None else None
    if axes is None:
        plt.close("all")
        fig, axes = plt.subplots(1, len(quantities), figsize=(4.2 * len(quantities), 3.6), sharex=True)
    else:
        fig = axes[0].figure
    axes = np.atleast_1d(axes)
    for ax, q in zip(axes, quantities):
        for chi in chi_list:
            rs = [r for r in select(rows, chi) if r[f"err_{q}"] is not None]
            # an exact zero cannot be drawn on a log axis: floor at 1e-17
            ax.semilogy([r["beta"] for r in rs], [max(r[f"err_{q}"], 1e-17) for r in rs], ".-", label=f"χ={chi}")
        ax.axvline(BETA_C, color="gray", ls=":", lw=1)
        ax.set_title(f"{NAMES[q]} 的相对误差")
        ax.set_xlabel("β")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_convergence(step_rows_by_beta, chi_rows_by_beta, quantities=("lnz", "u")):
    """Left: relative error against steps; right: against chi (both log scale), per beta."""
    import matplotlib.pyplot as plt

    _axes()
    plt.close("all")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.6, 3.8))
    for beta, srows in step_rows_by_beta.items():
        for q in quantities:
            pts = [(r["steps"], r[f"err_{q}"]) for r in srows if r[f"err_{q}"] is not None]
            a1.semilogy([p[0] for p in pts], [max(p[1], 1e-17) for p in pts], ".-", label=f"{NAMES[q]}, β={beta:.4f}")
    a1.set_xlabel("TRG 步数")
    a1.set_ylabel("相对误差")
    a1.legend(fontsize=8)
    for beta, crows in chi_rows_by_beta.items():
        for q in quantities:
            pts = [(r["chi"], r[f"err_{q}"]) for r in crows if r[f"err_{q}"] is not None]
            a2.semilogy([p[0] for p in pts], [max(p[1], 1e-17) for p in pts], "o-", label=f"{NAMES[q]}, β={beta:.4f}")
    a2.set_xlabel("χ")
    a2.legend(fontsize=8)
    fig.tight_layout()
    return fig


# --- command line -----------------------------------------------------------------------

def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m trglab.experiments.transition")
    p.add_argument("--beta-min", type=float, default=0.30)
    p.add_argument("--beta-max", type=float, default=0.60)
    p.add_argument("--points", type=int, default=7)
    p.add_argument("--dense-points", type=int, default=8)
    p.add_argument("--dense-width", type=float, default=0.02)
    p.add_argument("--chi", type=int, nargs="+", default=[8, 16, 24])
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args(argv)
    try:
        betas = beta_grid(args.beta_min, args.beta_max, args.points, args.dense_points, args.dense_width)
        rows, timing = scan(betas, args.chi, args.steps)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for r in rows:
        print(f"chi={r['chi']:3d} beta={r['beta']:.6f} lnZ/N={r['lnz']:.15f} u={r['u']:.12f} c={r['c']:.10f} "
              f"| err lnZ {r['err_lnz']:.2e} u {r['err_u']:.2e} c {r['err_c']:.2e}")
    for t in timing:
        print(f"chi={t['chi']} ks={t['ks']} first {t['first_s']:.1f} s, then {t['run_s'] or 0:.2f} s per point")
    for pk in peaks(rows, args.chi):
        print(f"chi={pk['chi']} c peak at beta={pk['beta_peak']:.6f} (beta_c{pk['shift']:+.6f}), c={pk['c_peak']:.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
