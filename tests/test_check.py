import argparse
import json
import math

import pytest

from trglab import check as C
from trglab.records import write_figure


def spec(**kw):
    C.validate_spec(kw)
    return kw


def ok(s, fresh, page=None):
    return C.compare(s, fresh, page)[0]


def test_exact_and_float():
    assert ok(spec(kind="exact", value=[2, 4, 4, 16]), [2, 4, 4, 16])
    assert not ok(spec(kind="exact", value=[2, 4, 4, 16]), [2, 4, 4, 8])
    f = spec(kind="float", value=0.704498679529762, rtol=0, atol=1e-13)
    assert ok(f, 0.704498679529762 + 5e-14) and not ok(f, 0.704498679529762 + 2e-13)
    assert ok(spec(kind="float", value=100.0, rtol=1e-3), 100.09) and not ok(spec(kind="float", value=100.0, rtol=1e-3), 100.2)
    assert ok(spec(kind="float", value=[1.0, 2.0], atol=1e-9), [1.0, 2.0 + 1e-10])
    assert not ok(spec(kind="float", value=[1.0, 2.0], atol=1e-9), [1.0])
    assert ok(spec(kind="float", value=math.nan), math.nan) and not ok(spec(kind="float", value=1.0, atol=1), math.nan)


@pytest.mark.parametrize("rule,value,fresh,expect", [
    ("all_below", 1e-8, 3e-9, True), ("all_below", 1e-8, [1e-9, 2e-8], False),
    ("all_above", 0, [1, 2], True), ("all_above", 0, [1, -2], False),
    ("max_ratio_below", 1.5, [1.0, 1.2, 1.5, 1.9], True), ("max_ratio_below", 1.5, [1.0, 2.0, 2.1], False),
    ("min_ratio_above", 1.8, [1.0, 2.0, 4.1], True), ("min_ratio_above", 1.8, [1.0, 2.0, 3.0], False),
    ("between", [0.2, 0.3], 0.286, True), ("between", [0.2, 0.3], 0.31, False),
])
def test_shape_rules(rule, value, fresh, expect):
    assert ok(spec(kind="shape", rule=rule, value=value), fresh) is expect


def test_monotone_and_alias_spelling():
    assert ok(spec(kind="shape", rule="monotone_increasing"), [1, 2, 3])
    assert not ok(spec(kind="shape", rule="monotone_increasing"), [1, 3, 2])
    assert ok(spec(kind="shape", rule="monotone_decreasing"), [3, 2, 1])
    assert ok(spec(kind="shape", rule="max_ratio", below=1.5), [1.0, 1.4])


def test_unstable_rules():
    etd = spec(kind="unstable", rule="equal_then_differ", split=4, atol=1e-12, differ_above=1e-6)
    a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert ok(etd, [a, a[:4] + [5.1, math.nan]])
    assert not ok(etd, [a, a])                            # never differs
    assert not ok(etd, [a, [1.1] + a[1:4] + [5.1, 6.1]])  # differs too early
    other = spec(kind="unstable", rule="equal_then_differ", split=1, other="b", differ_above=0.0)
    assert ok(other, [1.0, 2.0], {"b": [1.0, 3.0]}) and not ok(other, [1.0, 2.0], {})
    nf = spec(kind="unstable", rule="nonfinite_from", split=4)
    assert ok(nf, [1.0, 1.0, 1.0, 1.0, math.nan, math.inf]) and not ok(nf, [1.0, math.nan, 1.0, 1.0, math.nan])
    assert ok(spec(kind="unstable", rule="any_of", values=["SIGSEGV", "SIGBUS"]), "SIGBUS")
    # a sentence rule: shown, not compared
    assert C.compare(spec(kind="unstable", rule="differs from grad_5, see page"), 0.74) == (None, "differs from grad_5, see page")


@pytest.mark.parametrize("bad,msg", [
    ({"kind": "fuzzy", "value": 1}, "kind must be one of"),
    ({"kind": "float"}, "needs a 'value'"),
    ({"kind": "float", "value": 1, "atol": -1}, "atol must be"),
    ({"kind": "shape", "rule": "wiggly", "value": 1}, "shape rule must be"),
    ({"kind": "shape", "rule": "all_below"}, "needs a threshold"),
    ({"kind": "unstable", "rule": "equal_then_differ"}, "needs an int 'split'"),
    ({"kind": "unstable"}, "unstable needs a 'rule'"),
])
def test_malformed_specs_are_one_line_errors(bad, msg):
    with pytest.raises(C.ExpectedError, match=msg):
        C.validate_spec(bad)


@pytest.fixture
def tree(tmp_path):
    exp, res = tmp_path / "expected", tmp_path / "results"
    exp.mkdir()
    (exp / "pg.json").write_text(json.dumps({"page": "pg", "source_default": "seed 000", "figures": {
        "n": {"kind": "exact", "value": 5},
        "g": {"kind": "float", "value": 0.5, "atol": 1e-12, "source": "seed 001"},
        "t": {"kind": "shape", "rule": "max_ratio_below", "value": 1.5}}}))
    return exp, res


def args(exp, res, tmp_path, partial=False, accept=False):
    return argparse.Namespace(results=str(res), expected=str(exp), report=str(tmp_path / "check.json"),
                              partial=partial, accept=accept)


def test_all_reproduced(tree, tmp_path, capsys):
    exp, res = tree
    for name, value in (("n", 5), ("g", 0.5), ("t", [1.0, 1.2, 1.3])):
        write_figure("pg", name, value, res)
    assert C.run(args(exp, res, tmp_path)) == 0
    out = capsys.readouterr().out
    assert "3 ok" in out and "seed 001" in out and "seed 000" in out
    report = json.loads((tmp_path / "check.json").read_text())
    assert report["failed"] is False and len(report["rows"]) == 3


def test_a_miss_and_a_missing_figure_fail(tree, tmp_path, capsys):
    exp, res = tree
    write_figure("pg", "n", 6, res)
    write_figure("pg", "g", 0.5, res)
    assert C.run(args(exp, res, tmp_path)) == 1
    out = capsys.readouterr().out
    assert "MISS: pg.n" in out and "MISSING: pg.t" in out
    # --partial only checks what was produced: t is "not run"-like, n still misses
    assert C.run(args(exp, res, tmp_path, partial=True)) == 1
    write_figure("pg", "n", 5, res)
    assert C.run(args(exp, res, tmp_path, partial=True)) == 0


def test_a_page_that_did_not_run_fails_the_full_check_only(tree, tmp_path):
    exp, res = tree
    write_figure("other", "x", 1, res)  # an unlisted page: reported, not a failure
    assert C.run(args(exp, res, tmp_path, partial=True)) == 0
    assert C.run(args(exp, res, tmp_path)) == 1


def test_accept_rewrites_values_and_says_what_changed(tree, tmp_path, capsys):
    exp, res = tree
    for name, value in (("n", 7), ("g", 0.25), ("t", [1.0, 1.1])):
        write_figure("pg", name, value, res)
    assert C.run(args(exp, res, tmp_path, accept=True)) == 0
    out = capsys.readouterr().out
    assert "pg.n: 5 -> 7" in out and "pg.g: 0.5 -> 0.25" in out
    doc = json.loads((exp / "pg.json").read_text())
    assert doc["figures"]["n"]["value"] == 7 and doc["figures"]["g"]["atol"] == 1e-12
    assert doc["figures"]["t"] == {"kind": "shape", "rule": "max_ratio_below", "value": 1.5}
    assert doc["source_default"] == "seed 000"


def test_the_check_never_writes_data_without_accept(tree, tmp_path):
    exp, res = tree
    before = (exp / "pg.json").read_text()
    write_figure("pg", "n", 9, res)
    C.run(args(exp, res, tmp_path))
    assert (exp / "pg.json").read_text() == before


def test_the_book_expected_files_are_valid():
    C.load_expected()  # raises ExpectedError on a malformed data/expected file
