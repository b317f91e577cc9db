"""p25_whole_graph (JAX side): equations grow linearly, gradients match the seed."""

import subprocess
import sys

import pytest

from trglab.experiments import p25_whole_graph as p25

KS = (2, 4, 4)


def test_whole_graph_gradients_and_linear_equations():
    rows = [p25.whole_graph_run(0.3, KS[:n]) for n in (1, 2, 3)]
    assert rows[0]["grad"] == pytest.approx(1.667309214024311, abs=1e-14)  # seed 001
    assert rows[1]["grad"] == pytest.approx(1.277612005080206, abs=1e-14)  # tenferro = JAX (seed 001)
    eq = [r["eqns"] for r in rows]
    assert eq[0] < eq[1] < eq[2] and abs((eq[2] - eq[1]) - (eq[1] - eq[0])) < 0.2 * eq[0]
    assert all(r["make_jaxpr_ms"] > 0 and r["first_jit_ms"] > 0 for r in rows)
    assert rows[0]["eqns_all"] >= rows[0]["eqns"]


def test_chain_gradient_is_two_to_the_layers_and_eqns_linear():
    rows = p25.chain_runs([4, 8])
    assert [r["grad"] for r in rows] == [16.0, 256.0]  # fixed point y = 2: dy_n/dy_0 = 2^n
    assert rows[1]["eqns"] == 2 * rows[0]["eqns"]


def test_staged_fix_equals_whole():
    r = p25.staged_fix(0.3, 16, 3, repeat=1)
    assert abs(r["diff"]) < 1e-13 and r["staged_steady_ms"] > 0


def test_bad_input():
    with pytest.raises(ValueError, match="beta must be a positive number"):
        p25.whole_graph_runs(-1.0, 16, [1])
    with pytest.raises(ValueError, match="steps_list must be a non-empty list"):
        p25.whole_graph_runs(0.3, 16, [])
    with pytest.raises(ValueError, match="chi must be an int >= 2"):
        p25.whole_graph_runs(0.3, 1, [1])


def test_main_prints_seed_format_and_one_line_errors(capsys):
    assert p25.main(["--steps", "1", "--chain", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("trg steps= 1 eqns ") and "make_jaxpr(grad)" in out[0]
    assert "grad=1.66730921402431" in out[0]
    assert out[1].startswith("mul n= 3 eqns ")
    bad = subprocess.run([sys.executable, "-m", "trglab.experiments.p25_whole_graph", "--steps", "0"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == ["p25_whole_graph: error: every entry of --steps must be an int >= 1, got 0"]
