"""make bench plumbing: arguments, plan, one tiny child, tables, book timings. No timing asserts."""

import json

import pytest

from trglab import bench, bench_table


def test_parse_args_defaults_and_quick():
    a = bench.parse_args([])
    assert a.steps == [5, 10, 20, 40] and a.chi == 16 and a.chi_scaling == [8, 16, 24, 32]
    q = bench.parse_args(["--quick"])
    assert q.steps == [2, 3] and q.chi_scaling == [] and q.repeats == 1


@pytest.mark.parametrize("argv", [["--steps", "0"], ["--chi", "1"], ["--repeats", "0"], ["--beta", "-1"]])
def test_bad_arguments_exit_with_a_message(argv, capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(argv)
    assert "error:" in capsys.readouterr().err


def test_plan_covers_every_part():
    cfgs = bench.plan(bench.parse_args(["--steps", "5", "10", "--chi-scaling", "8", "16"]))
    parts = {c["part"] for c in cfgs}
    assert parts == {"methods", "compile", "steady", "profile", "onestep", "chi", "gram"}
    methods = {(c["method"], c["steps"]) for c in cfgs if c["part"] == "methods"}
    assert ("scan", 10) in methods and ("forward", 5) in methods and len(methods) == 12


def test_one_child_runs_and_reports_memory():
    cfg = {"part": "methods", "kind": "vg", "method": "scan", "beta": 0.3, "chi": 4,
           "steps": 4, "repeats": 1}
    row = bench.run_child(cfg, timeout=300)
    assert "error" not in row, row
    assert row["first_s"] > 0 and row["steady_s"] > 0
    assert row["rss_peak_mib"] >= row["rss_base_mib"] > 10
    assert row["ks"] == [2, 4, 4, 4]
    from trglab import grads

    assert row["grad"] == pytest.approx(grads.value_and_grad(0.3, (2, 4, 4, 4), "whole")[1], rel=1e-13)


def test_steady_child_interleaves_methods():
    cfg = {"part": "steady", "kind": "steady", "beta": 0.3, "chi": 4, "steps": 3,
           "methods": ["whole", "scan"], "rounds": 1}
    row = bench.run_child(cfg, timeout=300)
    assert "error" not in row, row
    assert set(row["ratio_to_forward"]) == {"forward", "whole", "scan"}
    assert row["ratio_to_forward"]["forward"] == 1.0


def test_compile_child_times_trace_and_compile():
    cfg = {"part": "compile", "kind": "compile", "method": "scan", "beta": 0.3, "chi": 4, "steps": 5}
    row = bench.run_child(cfg, timeout=300)
    assert "error" not in row, row
    assert row["trace_s"] > 0 and row["compile_s"] > 0


def test_child_error_is_reported():
    row = bench.run_child({"part": "x", "kind": "nope"}, timeout=120)
    assert "unknown kind" in row["error"]


def _fake_results():
    rows = []
    for steps, f10 in ((10, 1.0), (40, 1.2)):
        rows.append({"part": "methods", "method": "forward", "steps": steps, "first_s": 1.0,
                     "steady_s": 0.3, "rss_base_mib": 100.0, "rss_peak_mib": 150.0, "grad": None})
        rows.append({"part": "methods", "method": "scan", "steps": steps, "first_s": 2.0 * f10,
                     "steady_s": 0.36, "rss_base_mib": 100.0, "rss_peak_mib": 300.0, "grad": 0.7})
    rows.append({"part": "methods", "method": "whole", "steps": 40, "error": "timeout after 1 s"})
    rows.append({"part": "steady", "steps": 20, "rounds": 5, "steady_s": {"forward": 0.3, "scan": 0.39},
                 "ratio_to_forward": {"forward": 1.0, "scan": 1.3}})
    rows.append({"part": "onestep", "chi": 16, "step_s": 0.1, "svd_s": 0.04, "contract_s": 0.001,
                 "flops_step": 1e9, "bound_step_s": 0.01, "svd_share": 0.8, "step_s_per_chi6": 1e-8,
                 "rss_base_mib": 1.0, "rss_peak_mib": 2.0})
    res = {"machine": {"cpu": "test cpu", "cores": 2, "jax": "0", "date": "2026-01-01 00:00 UTC",
                       "loadavg_start": [1.0, 1, 1], "loadavg_end": [2.0, 1, 1]},
           "args": {"beta": 0.3, "chi": 16, "repeats": 3, "chi_steps": 20, "gram_steps": 20},
           "rows": rows, "book": {"note": "no build"}}
    bench.derive(res)
    res["summary"] = bench.summary(res)
    return res


def test_derive_and_summary_ratios():
    res = _fake_results()
    scan40 = [r for r in res["rows"] if r.get("method") == "scan" and r["steps"] == 40][0]
    assert scan40["steady_over_forward"] == pytest.approx(1.2)
    assert scan40["first_over_first10"] == pytest.approx(1.2)
    assert res["summary"]["scan_first_40_over_10"] == pytest.approx(1.2)
    assert "whole_first_40_over_10" not in res["summary"]  # the failed config is not used
    assert res["summary"]["scan_steady_over_forward_20_interleaved"] == pytest.approx(1.3)
    text = bench.render_text(res)
    assert "timeout after 1 s" in text and "test cpu" in text and "book: no build" in text


def test_write_and_render_page_table(tmp_path):
    res = _fake_results()
    path = bench.write_results(res, tmp_path)
    assert path.is_file() and (tmp_path / "latest.json").is_file()
    t = bench_table.bench_table("methods", out_dir=tmp_path)
    assert "test cpu" in t.html and "2026-01-01" in t.html and "<table" in t.html
    assert "1.20" in t.html  # the ratio column
    assert "test cpu" in repr(t)
    assert bench_table.bench_summary(tmp_path)["scan_first_40_over_10"] == pytest.approx(1.2)
    assert "1.30" in bench_table.bench_table("steady", out_dir=tmp_path).html
    assert "没有书的构建耗时" in bench_table.bench_table("book", out_dir=tmp_path).text


def test_page_table_without_bench_is_a_note(tmp_path):
    t = bench_table.bench_table("methods", out_dir=tmp_path / "none")
    assert "make bench" in t.text and "<table" not in t.html
    with pytest.raises(ValueError, match="unknown bench part"):
        bench_table.bench_table("nope", out_dir=tmp_path)


def test_book_timings_from_papermill_metadata(tmp_path):
    assert "make book" in bench.book_timings(tmp_path)["note"]
    run = tmp_path / "staging" / "20260101-000000-1" / "chapters" / "trg"
    run.mkdir(parents=True)
    for name, sec in (("ising_trg", 42.5), ("staged_grad", 7.5)):
        nb = {"cells": [], "metadata": {"papermill": {"duration": sec, "exception": None}},
              "nbformat": 4, "nbformat_minor": 5}
        (run / f"{name}.ipynb").write_text(json.dumps(nb))
    (run / "no_meta.ipynb").write_text(json.dumps({"cells": [], "metadata": {}}))
    book = bench.book_timings(tmp_path)
    assert book["total_s"] == pytest.approx(50.0) and book["max_s"] == pytest.approx(42.5)
    assert [p["page"] for p in book["pages"]] == ["ising_trg", "staged_grad"]


def test_op_category_names():
    assert bench.op_category("svd.1124") == "svd"
    assert bench.op_category("ynn_fusion.337") == "matmul"
    assert bench.op_category("dot_general.5") == "matmul" and bench.op_category("dot.248") == "matmul"
    assert bench.op_category("copy_select_fusion.12") == "copy/transpose"
    assert bench.op_category("transpose_copy_fusion") == "copy/transpose"
    assert bench.op_category("broadcast_divide_fusion.20") == "elementwise"
    for not_a_thunk in ("ThunkExecutor::Execute", "$api.py:2778 block_until_ready", "end: svd.1",
                        "bench:forward:0", "SlinkyThreadPool::Await", "ThreadpoolListener::Record"):
        assert bench.op_category(not_a_thunk) is None


def test_profile_child_and_rows():
    cfg = {"part": "profile", "kind": "profile", "beta": 0.3, "chi": 4, "steps": 4,
           "funcs": ["forward", "whole", "fwd_mode"], "calls": 2}
    row = bench.run_child(cfg, timeout=300)
    assert "error" not in row, row
    assert set(row["funcs"]) == {"forward", "whole", "fwd_mode"}
    for f in row["funcs"].values():
        assert f["wall_ms"] > 0 and f["ms"]["svd"] > 0  # the SVD thunks were found
    rows = bench.profile_rows([row])
    assert [r["func"] for r in rows] == ["forward", "whole", "fwd_mode"]
    assert rows[0]["ratio"] == 1.0 and 0 < rows[0]["svd_share"]


def test_fwd_mode_gives_the_gradient():
    cfg = {"part": "methods", "kind": "vg", "method": "fwd_mode", "beta": 0.3, "chi": 4,
           "steps": 4, "repeats": 1}
    row = bench.run_child(cfg, timeout=300)
    assert "error" not in row, row
    from trglab import grads

    assert row["grad"] == pytest.approx(grads.value_and_grad(0.3, (2, 4, 4, 4), "whole")[1], rel=1e-13)


def test_no_bench_note_renders_commands_as_code(tmp_path):
    t = bench_table.bench_table("steady", out_dir=tmp_path)
    assert "<code>make bench</code>" in t._repr_html_() and "`" not in t._repr_html_()
    assert "`make bench`" in repr(t)
