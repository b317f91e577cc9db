"""Memory of JAX computations on CPU, measured where it can be measured.

``jax.devices()[0].memory_stats()`` is None on the CPU backend, and process RSS does not
come back down after a call (the allocator keeps freed pages), so peak memory is taken
from two exact sources instead:

- ``compiled_bytes``: XLA's buffer assignment of a compiled program
  (``jax.jit(f).lower(*args).compile().memory_analysis()``): argument, output and temp
  bytes. temp is the arena the compiler assigns to the program's intermediate buffers,
  so argument + output + temp is the program's peak *as the compiler accounts it*.
  Scratch space that a CPU kernel allocates for itself (e.g. inside a matrix product
  or LAPACK's workspace) is not part of it: ``((v @ v) @ v).sum()`` reports temp 0.
- ``tree_bytes``: the bytes of the arrays held in a pytree (e.g. the residuals inside a
  ``jax.vjp`` closure), each distinct buffer counted once.
"""

import jax


def tree_bytes(tree):
    """Total bytes of the distinct arrays among the leaves of a pytree (int)."""
    seen = set()
    total = 0
    for leaf in jax.tree_util.tree_leaves(tree):
        if hasattr(leaf, "nbytes") and hasattr(leaf, "shape") and id(leaf) not in seen:
            seen.add(id(leaf))
            total += int(leaf.nbytes)
    return total


def compiled_bytes(fn, *args):
    """XLA memory of ``jax.jit(fn)`` at these arguments: dict with argument, output, temp
    and peak = argument + output + temp (bytes, ints). fn may already be jitted."""
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    stats = jitted.lower(*args).compile().memory_analysis()
    if stats is None:
        raise RuntimeError("this JAX backend reports no memory analysis for compiled programs")
    out = {
        "argument": int(stats.argument_size_in_bytes),
        "output": int(stats.output_size_in_bytes),
        "temp": int(stats.temp_size_in_bytes),
    }
    out["peak"] = out["argument"] + out["output"] + out["temp"]
    return out
