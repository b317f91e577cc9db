import pytest

from trglab.experiments import eager_traced as et
from trglab.trg import schedule


def test_mode_run_two_steps():
    r = et.mode_run(0.3, schedule(16, 2), repeat=1)
    assert r["steps"] == 2
    assert abs(r["grad_eager"] - 1.277612005080206) < 1e-13  # seed 001, 2 steps
    assert abs(r["grad_jit"] - r["grad_eager"]) < 1e-13
    assert r["jit_first_ms"] >= r["jit_trace_ms"] + r["jit_compile_ms"] > 0
    assert min(r["eager_first_ms"], r["eager_steady_ms"], r["jit_steady_ms"]) > 0


def test_mode_run_rejects_bad_input():
    with pytest.raises(ValueError, match="repeat"):
        et.mode_run(0.3, schedule(16, 1), repeat=0)
    with pytest.raises(ValueError, match="schedule"):
        et.mode_run(0.3, ())


def test_break_even_calls():
    row = {"eager_steady_ms": 10.0, "jit_steady_ms": 1.0, "jit_first_ms": 91.0}
    assert et.break_even_calls(row) == 10  # 91 + 9*1 = 100 = 10*10
    assert et.break_even_calls({"eager_steady_ms": 1.0, "jit_steady_ms": 2.0, "jit_first_ms": 5.0}) is None


def test_staged_eager_equals_jit():
    g_eager, g_jit = et.staged_eager_vs_jit(0.3, schedule(16, 3))
    assert abs(g_eager - g_jit) < 1e-13
