import json
import subprocess
import sys

import pytest


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "trglab", "trg", *args], capture_output=True, text=True, timeout=300)


def test_json_20_steps_reproduces_seed_u():
    p = _cli("--beta", "0.3", "--chi", "16", "--steps", "20", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["ks"][:5] == [2, 4, 4, 16, 16] and len(out["ks"]) == 20
    assert abs(out["u"] - (-0.704498679529762)) < 1e-12
    assert set(out) >= {"ks", "lnz_per_site", "u", "method", "seconds"}


@pytest.mark.parametrize(
    "args",
    [["--beta", "0"], ["--beta", "-1"], ["--beta", "x"], ["--chi", "1"], ["--steps", "0"],
     ["--ks", "2,,4"], ["--ks", "2,5"], ["--ks", "a"], ["--method", "magic"]],
)
def test_bad_input_one_line_exit_2(args):
    p = _cli(*args)
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
