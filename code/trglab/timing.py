"""Timing helpers: compile and run measured separately, always with block_until_ready."""

import time

import jax


def _block(out):
    return jax.block_until_ready(out)


def timed(fn, *args, **kwargs):
    """(seconds, result) of one call, waiting for every array in the result."""
    t0 = time.perf_counter()
    out = _block(fn(*args, **kwargs))
    return time.perf_counter() - t0, out


def first_and_steady(fn, *args, repeat=3, **kwargs):
    """(first_s, steady_s, result): the first call (trace + compile + run) and the
    minimum over ``repeat`` further calls (steady state)."""
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    first, out = timed(fn, *args, **kwargs)
    steady = min(timed(fn, *args, **kwargs)[0] for _ in range(repeat))
    return first, steady, out
