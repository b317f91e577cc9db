"""The 2D Ising model on the square lattice (J = 1, no field) as a tensor network.

Index order everywhere in this package: ``T[u, l, d, r]`` (up, left, down, right).
"""

import jax.numpy as jnp


def bond_matrix(beta):
    """W[s, a] with sum_a W[s, a] W[s', a] = exp(beta * s * s'), shape (2, 2).

    W = [[sqrt(cosh b), sqrt(sinh b)], [sqrt(cosh b), -sqrt(sinh b)]]; rows are the
    spin s = +1, -1, columns the bond index a.
    """
    c = jnp.sqrt(jnp.cosh(beta))
    s = jnp.sqrt(jnp.sinh(beta))
    return jnp.stack([jnp.stack([c, s]), jnp.stack([c, -s])])


def site_tensor(beta):
    """The site tensor T[u, l, d, r] = sum_s W[s,u] W[s,l] W[s,d] W[s,r], shape (2, 2, 2, 2).

    Contracting one T per site (r of a site with l of its right neighbour, d with u of
    the neighbour below) gives the partition function Z of the Ising model at ``beta``.
    """
    w = bond_matrix(beta)
    return jnp.einsum("su,sl,sd,sr->uldr", w, w, w, w)
