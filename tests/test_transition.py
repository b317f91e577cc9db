import math

import numpy as np
import pytest

from trglab import onsager
from trglab.experiments import transition as tr
from trglab.trg import schedule


def test_beta_grid_default():
    g = tr.beta_grid()
    assert g == sorted(g) and len(g) == len(set(g))
    assert all(abs(b - onsager.BETA_C) > 1e-9 for b in g)
    for named in (0.3, 0.4, 0.5, 0.6):
        assert any(abs(b - named) < 1e-12 for b in g)
    near = [b for b in g if abs(b - onsager.BETA_C) < 0.02]
    assert len(near) >= 8
    assert g[0] == 0.3 and g[-1] == 0.6


@pytest.mark.parametrize("kwargs, msg", [
    ({"beta_min": 0.5, "beta_max": 0.3}, "beta_min < beta_max"),
    ({"points": 1}, "points must be an int >= 2"),
    ({"dense_points": -1}, "dense_points"),
    ({"dense_width": 0.0}, "dense_width"),
])
def test_beta_grid_bad_input(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        tr.beta_grid(**kwargs)


def test_parabola_peak():
    x = np.linspace(0.40, 0.48, 9)
    y = 3.0 - 50.0 * (x - 0.4431) ** 2
    xp, yp = tr.parabola_peak(x, y)
    assert abs(xp - 0.4431) < 1e-12 and abs(yp - 3.0) < 1e-12
    assert tr.parabola_peak(x, x) == (0.48, 0.48)  # not bracketed: the end point


@pytest.mark.parametrize("chi", [8, 16])
def test_schedule_does_not_depend_on_beta_in_range(chi):
    ref = schedule(chi, 12, onsager.BETA_C)
    assert schedule(chi, 12, 0.3) == ref
    assert schedule(chi, 12, 0.6) == ref


def test_tiny_scan():
    betas = [0.3, 0.43, 0.5]
    rows, timing = tr.scan(betas, [4, 6], 8, progress=False)
    assert [(r["chi"], r["beta"]) for r in rows] == [(c, b) for c in (4, 6) for b in betas]
    assert [t["chi"] for t in timing] == [4, 6] and timing[0]["points"] == 3
    for r in rows:
        assert all(math.isfinite(r[q]) for q in ("lnz", "u", "c"))
        assert len(r["by_depth"]["lnz"]) == 8 and r["by_depth"]["lnz"][-1] == r["lnz"]
        assert r["exact_lnz"] == onsager.lnz_per_site(r["beta"])
        assert r["err_lnz"] < 1e-2 and r["err_u"] < 1e-1
    # away from beta_c a larger chi is at least as accurate in ln Z/N
    assert tr.at(rows, 6, 0.3)["err_lnz"] <= tr.at(rows, 4, 0.3)["err_lnz"]
    pk = tr.peaks(rows, [4, 6])
    assert [p["chi"] for p in pk] == [4, 6]
    with pytest.raises(ValueError, match="at least 3 points"):
        tr.peaks(rows, [4], window=(0.42, 0.46))  # only one grid point inside
    errs = tr.error_table(rows, [4, 6], [0.3, 0.5])
    assert len(errs) == 4
    with pytest.raises(KeyError):
        tr.at(rows, 4, 0.31)


def test_convergence_in_steps_at_beta_c():
    rows = tr.convergence_in_steps(onsager.BETA_C, 4, 6)
    assert [r["steps"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r["k"] for r in rows] == list(schedule(4, 6, onsager.BETA_C))
    assert all(r["err_c"] is None for r in rows)  # c diverges at beta_c: no reference
    assert rows[-1]["err_lnz"] < rows[0]["err_lnz"]


def test_scan_bad_input():
    with pytest.raises(ValueError, match="chi_list"):
        tr.scan([0.3], [], 4, progress=False)
    with pytest.raises(ValueError, match="every chi must be an int >= 2"):
        tr.scan([0.3], [1], 4, progress=False)
    with pytest.raises(ValueError, match="betas must be"):
        tr.scan([-0.3], [4], 4, progress=False)
