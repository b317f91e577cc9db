import pytest

from trglab.experiments import staged_grad as sg
from trglab.trg import schedule


def test_compare_run_short_chain():
    r = sg.compare_run(0.3, schedule(16, 3), repeat=1)
    assert r["steps"] == 3
    assert abs(r["diff"]) < 1e-13 and abs(r["lnz_whole"] - r["lnz_staged"]) < 1e-14
    assert abs(r["grad_staged"] - 1.023802944795145) < 1e-13  # seed 001, 3 steps
    assert r["whole_first_ms"] >= r["whole_compile_ms"] > 0 and r["whole_steady_ms"] > 0
    assert r["staged_peak_bytes"] > r["staged_residual_bytes"] > 0 and r["whole_peak_bytes"] > 0


def test_staged_memory_grows_with_depth():
    a = sg._staged_peak(0.3, schedule(16, 4))
    b = sg._staged_peak(0.3, schedule(16, 6))
    assert b[1] > a[1]  # more residuals held for a deeper chain


def test_compare_run_rejects_bad_schedule():
    with pytest.raises(ValueError, match="schedule entry 0"):
        sg.compare_run(0.3, (8,))


def test_bytes_per_step():
    rows = [{"steps": 2, "m": 10}, {"steps": 4, "m": 40}]
    assert sg.bytes_per_step(rows, "m") == [5.0, 10.0]
