import math

import pytest

from trglab.grads import specific_heat_fd, value_and_grad
from trglab.records import write_figure
from trglab.trg import schedule

# Recorded d(lnZ/N)/dbeta at beta = 0.3, chi = 16 (seed pages; foundation issue section 5)
RECORDED_GRAD = {1: 1.667309214024311, 2: 1.277612005080206, 3: 1.023802944795145,
                 4: 0.844054073623855, 5: 0.744793433247367, 6: 0.712432002551333,
                 20: 0.704498679529762}
KS20 = schedule(16, 20)


@pytest.mark.parametrize("steps", [1, 2, 3, 4, 5, 6, 20])
def test_staged_reproduces_recorded_gradient(steps):
    _, g = value_and_grad(0.3, KS20[:steps], method="staged")
    assert math.isclose(g, RECORDED_GRAD[steps], rel_tol=0, abs_tol=1e-13)
    if steps in (5, 20):
        write_figure("ising_trg", f"grad_{steps}", g)
        write_figure("ising_trg", f"u_{steps}", -g)


@pytest.mark.parametrize("steps", [1, 4, 5, 20])
def test_whole_graph_equals_staged(steps):
    v1, g1 = value_and_grad(0.3, KS20[:steps], method="whole")
    v2, g2 = value_and_grad(0.3, KS20[:steps], method="staged")
    assert abs(v1 - v2) < 1e-14 and abs(g1 - g2) < 1e-13


def test_whole_graph_without_jit():
    _, g = value_and_grad(0.3, KS20[:4], method="whole", jit=False)
    assert abs(g - RECORDED_GRAD[4]) < 1e-13


def test_checkpoint_equals_plain_up_to_4_steps():
    for steps in (1, 2, 3, 4):
        _, g = value_and_grad(0.3, KS20[:steps], method="checkpoint")
        assert abs(g - RECORDED_GRAD[steps]) < 1e-13


def test_specific_heat_20_steps():
    c = specific_heat_fd(0.3, KS20)
    write_figure("ising_trg", "c_20", c)
    assert abs(c - 0.286288378175) < 1e-9


def test_unknown_method():
    with pytest.raises(ValueError, match="unknown method"):
        value_and_grad(0.3, (2,), method="magic")
