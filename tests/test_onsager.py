import math

import numpy as np
import pytest
from scipy import special

from trglab import onsager

CATALAN = 0.915965594177219015054603514932


def test_beta_c():
    assert onsager.BETA_C == pytest.approx(math.log(1 + math.sqrt(2)) / 2, rel=0, abs=1e-16)
    assert math.sinh(2 * onsager.BETA_C) == pytest.approx(1.0, rel=0, abs=1e-15)


def test_values_at_beta_c():
    assert abs(onsager.lnz_per_site(onsager.BETA_C) - (2 * CATALAN / math.pi + math.log(2) / 2)) < 1e-14
    assert abs(onsager.energy_per_site(onsager.BETA_C) + math.sqrt(2)) < 1e-12


@pytest.mark.parametrize("beta, lnz, u, c", [
    (0.4, 0.879363820775, -1.10607920, 0.86169836),
    (0.5, 1.025792812695, -1.74556458, 0.72487145),
])
def test_known_values(beta, lnz, u, c):
    assert abs(onsager.lnz_per_site(beta) - lnz) < 1e-12
    assert abs(onsager.energy_per_site(beta) - u) < 1e-8
    assert abs(onsager.specific_heat(beta) - c) < 1e-8


def _fd(f, b, h):
    return (f(b + h) - f(b - h)) / (2 * h)


@pytest.mark.parametrize("beta", [0.1, 0.3, 0.42, 0.44, onsager.BETA_C - 1e-3, onsager.BETA_C + 1e-3, 0.46, 0.6, 1.0])
def test_u_is_minus_derivative_of_lnz(beta):
    fd = -_fd(onsager.lnz_per_site, beta, 1e-5)
    assert abs(fd - onsager.energy_per_site(beta)) < 1e-7


@pytest.mark.parametrize("beta", [0.1, 0.3, 0.42, 0.44, onsager.BETA_C - 1e-3, onsager.BETA_C + 1e-3,
                                  onsager.BETA_C + 1e-5, 0.46, 0.6, 1.0])
def test_c_is_beta2_second_derivative(beta):
    h = 1e-7 if abs(beta - onsager.BETA_C) < 1e-4 else 1e-5
    fd = -beta**2 * _fd(onsager.energy_per_site, beta, h)
    assert abs(fd - onsager.specific_heat(beta)) < 1e-4 * max(1.0, abs(fd))


def _c_closed_form(beta, factor):
    """Closed form (2/pi)(beta coth 2b)^2 [2K - 2E - factor (1 - tanh^2 2b)(pi/2 + (2 tanh^2 2b - 1) K)].

    factor = 2 is the correct form; the variant printed with factor 1 fails the
    finite-difference check of u.
    """
    t = math.tanh(2 * beta)
    kappa = 2 * math.sinh(2 * beta) / math.cosh(2 * beta) ** 2
    k, e = special.ellipk(kappa**2), special.ellipe(kappa**2)
    return (2 / math.pi) * (beta / t) ** 2 * (2 * k - 2 * e - factor * (1 - t * t) * (math.pi / 2 + (2 * t * t - 1) * k))


@pytest.mark.parametrize("beta", [0.3, 0.4, 0.5])
def test_closed_form_agrees_and_printed_variant_fails(beta):
    fd = -beta**2 * _fd(onsager.energy_per_site, beta, 1e-5)
    assert abs(onsager.specific_heat(beta) - fd) < 1e-7
    assert abs(_c_closed_form(beta, 2.0) - onsager.specific_heat(beta)) < 1e-12
    assert abs(_c_closed_form(beta, 1.0) - fd) > 1e-2


def test_log_divergence_at_beta_c():
    # c ~ -(8 beta_c^2 / pi) ln|beta - beta_c|: one decade closer adds (8 beta_c^2 / pi) ln 10
    slope = 8 * onsager.BETA_C**2 / math.pi * math.log(10)
    for sign in (-1, 1):
        c6 = onsager.specific_heat(onsager.BETA_C + sign * 1e-6)
        c7 = onsager.specific_heat(onsager.BETA_C + sign * 1e-7)
        assert abs((c7 - c6) - slope) < 1e-3


def test_arrays_and_exact():
    bs = np.array([0.3, 0.4, 0.5])
    assert onsager.lnz_per_site(bs).shape == (3,)
    assert np.allclose(onsager.specific_heat(bs), [onsager.specific_heat(b) for b in bs], rtol=0, atol=1e-15)
    lnz, u, c = onsager.exact(0.4)
    assert (lnz, u, c) == (onsager.lnz_per_site(0.4), onsager.energy_per_site(0.4), onsager.specific_heat(0.4))


@pytest.mark.parametrize("bad", [0.0, -0.3, float("nan"), float("inf")])
def test_bad_beta(bad):
    with pytest.raises(ValueError, match="beta must be a positive finite number"):
        onsager.lnz_per_site(bad)
    with pytest.raises(ValueError, match="beta must be a positive finite number"):
        onsager.specific_heat(bad)


def test_fd_residuals():
    ru, rc = onsager.fd_residuals(0.4)
    assert abs(ru) < 1e-8 and abs(rc) < 1e-7
    with pytest.raises(ValueError, match="0 < h < beta"):
        onsager.fd_residuals(0.4, h=1.0)
