import math

import jax
import numpy as np
import pytest

from trglab.ising import site_tensor
from trglab.trg import lnz_per_site, schedule, step, validate_schedule

# Recorded at beta = 0.3, chi = 16 (seed pages, JAX 0.12.0.1, CPU, x64)
LNZ_5, LNZ_20 = 0.792026414104853, 0.790559063800966
ONSAGER_LNZ_03 = 0.790559070951263


def test_schedule_chi16():
    assert schedule(16, 6) == (2, 4, 4, 16, 16, 16)
    assert schedule(8, 5) == (2, 4, 4, 8, 8)


def test_step_shapes_and_norm():
    t = site_tensor(0.3)
    t1, ln = step(t, 2)
    assert t1.shape == (2, 2, 2, 2)
    assert math.isclose(float(ln), math.log(float(np.linalg.norm(np.asarray(t)))), rel_tol=1e-14)


def test_exact_steps_preserve_z():
    # with full-rank truncation a step is exact: ln Z of the 2^n-site torus is unchanged
    beta = 0.3
    ks = schedule(16, 5)
    assert all(k <= 16 for k in ks)
    assert math.isclose(float(lnz_per_site(beta, ks)), LNZ_5, rel_tol=0, abs_tol=1e-13)


def test_lnz_20_steps_near_onsager():
    v = float(lnz_per_site(0.3, schedule(16, 20)))
    assert math.isclose(v, LNZ_20, rel_tol=0, abs_tol=1e-13)
    assert abs(v - ONSAGER_LNZ_03) < 1e-8


@pytest.mark.parametrize("ks", [(), (0,), (2, 5), (3, 17), ("a",), 5])
def test_validate_schedule_rejects(ks):
    with pytest.raises(ValueError):
        validate_schedule(ks)


def test_validate_schedule_chi_cap():
    with pytest.raises(ValueError, match="exceeds chi"):
        validate_schedule((2, 4, 4, 16), chi=8)
    assert validate_schedule([2, 4, np.int64(4)]) == (2, 4, 4)
