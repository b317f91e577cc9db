import jax.numpy as jnp
import pytest

from trglab.memory import compiled_bytes, tree_bytes


def test_tree_bytes_counts_each_buffer_once():
    a = jnp.zeros((10, 10))  # 800 bytes in float64
    b = jnp.zeros(3)
    assert tree_bytes({"x": a, "y": [a, b], "z": 1.0}) == 800 + 24


def test_compiled_bytes_of_a_program():
    x = jnp.ones((64, 64))
    m = compiled_bytes(lambda v: (v @ v).sum(), x)
    assert m["argument"] == 64 * 64 * 8
    assert m["output"] == 8
    assert m["peak"] == m["argument"] + m["output"] + m["temp"]
    sorted_ = compiled_bytes(lambda v: jnp.sort(v @ v, axis=0).sum(), x)
    assert sorted_["temp"] >= 64 * 64 * 8  # the sorted intermediate lives in the temp arena


def test_compiled_bytes_rejects_bad_arguments():
    with pytest.raises(TypeError):
        compiled_bytes(lambda v: v + 1, "not an array")
