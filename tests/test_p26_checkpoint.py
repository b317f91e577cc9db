import re

import pytest

from trglab.experiments import p26_checkpoint as p26
from trglab.trg import schedule

RECORDED_GRAD_3 = 1.023802944795145  # seed pages, JAX whole-graph gradient at 3 steps


def test_parse_residuals():
    text = ("f64[16,16] output of mul from x.py:1\n"
            "f64[] from a literal\n"
            "bool[2, 3] output of eq from y.py:2\n"
            "not a residual line\n")
    assert p26.parse_residuals(text) == (3, 16 * 16 * 8 + 8 + 6)
    with pytest.raises(ValueError, match="unknown dtype"):
        p26.parse_residuals("q7[3] output of something")


def test_checkpoint_saves_fewer_residuals():
    ks = schedule(16, 3)
    pc, pb, _ = p26.saved_residuals(0.3, ks, checkpoint=False)
    cc, cb, _ = p26.saved_residuals(0.3, ks, checkpoint=True)
    assert cc < pc and cb < pb


def test_grad_pair_equal_below_five_steps():
    row = p26.grad_pair(0.3, schedule(16, 3), repeat=0)
    assert abs(row["grad"] - RECORDED_GRAD_3) < 1e-13
    assert abs(row["diff"]) < 1e-13
    assert row["grad_steady_ms"] is None and row["grad_first_ms"] > 0


def test_format_line_is_the_seeds():
    line = p26.format_line({"steps": 5, "grad": 0.744793433247367, "grad_ckpt": 0.5})
    assert line == "steps= 5 grad=0.744793433247367 grad with jax.checkpoint per step=0.500000000000000"


def test_main_prints_one_line_per_run(capsys):
    assert p26.main(["--steps", "1", "2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert all(re.fullmatch(r"steps= \d grad=\S+ grad with jax\.checkpoint per step=\S+", ln) for ln in lines)


@pytest.mark.parametrize("argv", [["--steps", "0"], ["--beta", "-1"], ["--chi", "1"]])
def test_main_bad_input_one_line(argv, capsys):
    assert p26.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")


@pytest.mark.parametrize("bad", [[], [0], ["x"]])
def test_grad_pairs_rejects_bad_steps(bad):
    with pytest.raises(ValueError, match="steps"):
        p26.grad_pairs(0.3, 16, bad)


def test_labelled_renames_and_orders():
    rows = [{"a": 1, "b": 2, "c": 3}]
    assert p26.labelled(rows, {"c": "C", "a": "A"}) == [{"C": 3, "A": 1}]


def test_plot_chain_growth_draws_both_panels():
    import matplotlib

    matplotlib.use("Agg")
    from trglab.models import checkpoint_chain as cc

    model = cc.tenferro_trg_chain(3)
    union = cc.tenferro_trg_chain(3, merge="union")
    fig = p26.plot_chain_growth([1, 25, 601], model, model, union, [2, 4], cc.square_chain(4), 1000)
    ax1, ax2 = fig.axes
    assert len(ax1.lines) == 5 and len(ax2.lines) == 3
    assert list(ax2.lines[0].get_ydata()) == [3, 15]
