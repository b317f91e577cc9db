"""Onsager's exact solution of the 2D Ising model on the square lattice (J = 1, no field).

Per site, with a = 2 beta, kappa = 2 sinh(a) / cosh(a)^2 (the elliptic modulus, m = kappa^2):

    ln Z / N = ln(2 cosh a) + (1 / pi) int_0^(pi/2) ln[(1 + sqrt(1 - kappa^2 sin^2 t)) / 2] dt
    u        = -d(ln Z / N)/d beta = -coth(a) [1 + (2 / pi) q K(kappa)],   q = 2 tanh(a)^2 - 1
    c        = beta^2 d^2(ln Z / N)/d beta^2 = -beta^2 du/d beta

K, E are the complete elliptic integrals of the first and second kind. scipy's ``ellipk(m)``
takes the parameter m = kappa^2, not the modulus kappa.

Numerics near the critical point beta_c = ln(1 + sqrt 2) / 2 (kappa -> 1):

- 1 - kappa = (sinh a - 1)^2 / cosh(a)^2 is computed in this factored form, so
  1 - kappa^2 keeps its relative precision and K comes from ``ellipkm1(1 - m)``;
- c is written with du/da = d/da of the formula for u, using
  dK/dkappa = E / (kappa (1 - kappa^2)) - K / kappa; the dangerous product
  q * kappa' / (1 - kappa^2) (a 0 * 0 / 0 form at beta_c) is simplified by hand to
  -2 (1 + sinh a)^2 / (cosh(a)^3 (1 + kappa)), so the only singular piece left is the
  logarithm of K: c diverges as -(8 beta_c^2 / pi) ln|beta - beta_c|. It is +inf only
  where 1 - kappa^2 rounds to 0; at the float nearest beta_c (``BETA_C``) c is about 18.

The frequently printed closed form of c with (1 - tanh^2 2 beta) in place of the correct
factor fails a finite-difference check of u; the form here is checked against finite
differences of u in ``tests/test_onsager.py``.
"""

import math

import numpy as np
from scipy import integrate, special

BETA_C = math.log(1.0 + math.sqrt(2.0)) / 2.0
beta_c = BETA_C  # lower-case alias


def _check_beta(beta):
    b = np.asarray(beta, dtype=np.float64)
    if not np.all(np.isfinite(b)) or np.any(b <= 0):
        raise ValueError(f"beta must be a positive finite number, got {beta!r}")
    return b


def _pieces(b):
    """kappa, 1 - kappa (robust), 1 - kappa^2 (robust), K(kappa), E(kappa) for a = 2 beta."""
    a = 2.0 * b
    sh, ch = np.sinh(a), np.cosh(a)
    kappa = 2.0 * sh / ch**2
    one_minus = (sh - 1.0) ** 2 / ch**2
    p = one_minus * (1.0 + kappa)  # 1 - kappa^2 = 1 - m
    with np.errstate(divide="ignore"):
        k = special.ellipkm1(p)
    e = special.ellipe(1.0 - p)
    return a, sh, ch, kappa, p, k, e


def _lnz_scalar(b):
    a = 2.0 * b
    _, _, ch, kappa, p, _, _ = _pieces(b)
    k2 = kappa * kappa

    def integrand(t):
        # 1 - kappa^2 sin^2 t = (1 - kappa^2) + kappa^2 cos^2 t: no cancellation near kappa = 1
        return math.log1p(math.sqrt(p + k2 * math.cos(t) ** 2)) - math.log(2.0)

    val, _ = integrate.quad(integrand, 0.0, math.pi / 2, epsabs=1e-15, epsrel=1e-13, limit=200)
    return math.log(2.0 * ch) + val / math.pi


def lnz_per_site(beta):
    """ln Z / N at inverse temperature beta > 0 (scalar or array, float64)."""
    b = _check_beta(beta)
    out = np.vectorize(_lnz_scalar, otypes=[np.float64])(b)
    return float(out) if out.ndim == 0 else out


def energy_per_site(beta):
    """u = <E>/N = -d(ln Z/N)/d beta (scalar or array); u(beta_c) = -sqrt 2."""
    b = _check_beta(beta)
    a, sh, ch, kappa, p, k, e = _pieces(b)
    q = (sh - 1.0) * (sh + 1.0) / ch**2  # 2 tanh^2 a - 1, exactly 0 at beta_c
    qk = np.where(q == 0.0, 0.0, q * np.where(np.isinf(k), 0.0, k))
    out = -(ch / sh) * (1.0 + (2.0 / np.pi) * qk)
    return float(out) if out.ndim == 0 else out


def specific_heat(beta):
    """c = beta^2 d^2(ln Z/N)/d beta^2 = -beta^2 du/d beta (scalar or array).

    Log-divergent at beta_c; +inf where 1 - kappa^2 rounds to 0.
    """
    b = _check_beta(beta)
    a, sh, ch, kappa, p, k, e = _pieces(b)
    th = sh / ch
    q = (sh - 1.0) * (sh + 1.0) / ch**2
    dq = 4.0 * th / ch**2  # dq/da
    dkappa = 2.0 * (1.0 - sh) * (1.0 + sh) / ch**3  # d kappa/da
    ratio = -2.0 * (1.0 + sh) ** 2 / (ch**3 * (1.0 + kappa))  # q * dkappa / (1 - kappa^2)
    with np.errstate(invalid="ignore"):
        bracket = dq * k - q * dkappa * k / kappa + ratio * e / kappa
        du_da = (1.0 / sh**2) * (1.0 + (2.0 / np.pi) * np.where(q == 0.0, 0.0, q * k)) - (ch / sh) * (2.0 / np.pi) * bracket
    out = -2.0 * b**2 * du_da
    out = np.where(np.isinf(k), np.inf, out)
    return float(out) if out.ndim == 0 else out


def exact(beta):
    """(ln Z/N, u, c) at one beta (floats)."""
    return lnz_per_site(beta), energy_per_site(beta), specific_heat(beta)


def fd_residuals(beta, h=1e-5):
    """How well u and c match central differences of the functions they derive from.

    Returns (r_u, r_c) with r_u = u - (-(lnZ(b + h) - lnZ(b - h)) / 2h) and
    r_c = c - (-b^2 (u(b + h) - u(b - h)) / 2h); both are O(h^2) away from beta_c.
    """
    b = float(_check_beta(beta))
    if not 0 < h < b:
        raise ValueError(f"step h must satisfy 0 < h < beta, got h={h!r}")
    du = -(lnz_per_site(b + h) - lnz_per_site(b - h)) / (2 * h)
    dc = -b * b * (energy_per_site(b + h) - energy_per_site(b - h)) / (2 * h)
    return energy_per_site(b) - du, specific_heat(b) - dc
