import itertools
import math

import numpy as np

from trglab.ising import bond_matrix, site_tensor


def test_bond_matrix_gives_boltzmann_weights():
    beta = 0.37
    w = np.asarray(bond_matrix(beta))
    for i, s in enumerate((1, -1)):
        for j, s2 in enumerate((1, -1)):
            assert math.isclose(w[i] @ w[j], math.exp(beta * s * s2), rel_tol=1e-14)


def test_site_tensor_is_symmetric_and_rank_two():
    t = np.asarray(site_tensor(0.3))
    assert t.shape == (2, 2, 2, 2)
    for perm in itertools.permutations(range(4)):
        np.testing.assert_allclose(np.transpose(t, perm), t, atol=1e-15)
    s = np.linalg.svd(t.reshape(4, 4), compute_uv=False)
    assert s[1] > 1e-3 and s[2] < 1e-14


def test_two_by_two_torus_matches_brute_force():
    # 2 x 2 periodic lattice: each pair of neighbours is joined by two bonds
    beta = 0.41
    t = np.asarray(site_tensor(beta))
    z_tn = np.einsum("aebf,cfde,bgah,dhcg->", t, t, t, t)
    z = 0.0
    for s in itertools.product((1, -1), repeat=4):
        s00, s01, s10, s11 = s
        e = 2 * (s00 * s01 + s10 * s11 + s00 * s10 + s01 * s11)
        z += math.exp(beta * e)
    assert math.isclose(z_tn, z, rel_tol=1e-13)
