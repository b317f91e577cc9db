"""The latest ``make bench`` results as a table for a page (with machine and date).

On a page::

    from trglab.bench_table import bench_table
    bench_table("methods")  # or "compile", "steady", "profile", "onestep", "chi", "gram", "book"

shows an HTML table (text in a terminal) of ``<repo>/_build/bench/latest.json`` (else the
newest ``bench-*.json``) with a caption naming the machine, the date, the load and the
file; when no bench has run it shows a one-line note saying how to run one. The page does
not re-run the benchmark (that takes minutes): these figures are read, with their source.
"""

import json
import re
from html import escape
from pathlib import Path

from .html import table_html

PARTS = {
    # part: (caption, [(header, key, format)])
    "methods": ("求值与求导的耗时与内存（first = 追踪 + 编译 + 运行；steady = 稳定调用）", [
        ("步数", "steps", None), ("方法", "method", None), ("first (s)", "first_s", ".3f"),
        ("steady (s)", "steady_s", ".3f"), ("steady / 前向", "steady_over_forward", ".2f"),
        ("first / first@10步", "first_over_first10", ".2f"), ("峰值内存 (MiB)", "rss_peak_mib", ".0f"),
        ("增量 (MiB)", "rss_delta_mib", ".0f")]),
    "compile": ("求导图的追踪与 XLA 编译耗时（不运行）", [
        ("步数", "steps", None), ("方法", "method", None), ("追踪 (s)", "trace_s", ".3f"),
        ("编译 (s)", "compile_s", ".3f"), ("合计 (s)", "trace_compile_s", ".3f"),
        ("/ 同方法 10 步", "tc_over_10", ".2f")]),
    "steady": ("同一进程内交替调用的稳定耗时（各取多轮最小值）及其与纯前向之比", [
        ("步数", "steps", None), ("方法", "method", None), ("steady (s)", "steady_s", ".3f"),
        ("/ 前向", "ratio", ".2f"), ("轮数", "rounds", None)]),
    "profile": ("一次稳定调用的时间花在哪里（JAX profiler 记录的 XLA CPU 算子，按种类合计，毫秒）", [
        ("步数", "steps", None), ("函数", "func", None), ("墙钟 (ms)", "wall_ms", ".1f"),
        ("SVD", "svd_ms", ".1f"), ("矩阵乘", "matmul_ms", ".1f"), ("拷贝/转置", "copy_ms", ".1f"),
        ("逐元素", "elementwise_ms", ".1f"), ("未覆盖", "untraced_ms", ".1f"),
        ("SVD 占比", "svd_share", ".2f"), ("/ 前向", "ratio", ".2f")]),
    "onestep": ("一步 TRG（D = k = chi）：SVD 占比与浮点下界", [
        ("chi", "chi", None), ("一步 (s)", "step_s", ".4f"), ("一次 SVD (s)", "svd_s", ".4f"),
        ("2 次 SVD / 一步", "svd_share", ".2f"), ("收缩 (s)", "contract_s", ".5f"),
        ("浮点运算 / 步", "flops_step", ".3g"), ("下界 (s)", "bound_step_s", ".4f"),
        ("实测 / 下界", "step_over_bound", ".1f")]),
    "chi": ("chi 的标度（scan 形式）", [
        ("chi", "chi", None), ("步数", "steps", None), ("方法", "method", None),
        ("first (s)", "first_s", ".3f"), ("steady (s)", "steady_s", ".3f"),
        ("steady / chi^6 (×1e6)", "steady_per_chi6_e6", ".3f"), ("峰值内存 (MiB)", "rss_peak_mib", ".0f")]),
    "gram": ("Gram 矩阵 eigh 截断 vs 精确 SVD 规则", [
        ("规则", "rule", None), ("方法", "method", None), ("first (s)", "first_s", ".3f"),
        ("steady (s)", "steady_s", ".3f"), ("ln Z/N", "lnz", ".15f"), ("梯度", "grad", ".15f"),
        ("与精确规则的相对差", "rel_diff", ".1e")]),
}


def bench_dir():
    from .paths import repo_root

    return repo_root() / "_build" / "bench"


def latest_path(out_dir=None):
    """Path of the latest bench JSON in ``out_dir`` (default _build/bench), or None."""
    d = Path(out_dir) if out_dir else bench_dir()
    if (d / "latest.json").is_file():
        return d / "latest.json"
    runs = sorted(d.glob("bench-*.json")) if d.is_dir() else []
    return runs[-1] if runs else None


def load_latest(out_dir=None):
    """The latest bench results dict, or None when no bench has run."""
    path = latest_path(out_dir)
    if path is None:
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    data["_path"] = str(path)
    return data


class BenchTable:
    """Display object: HTML in a notebook, text in a terminal."""

    def __init__(self, html, text):
        self.html, self.text = html, text

    def _repr_html_(self):
        return self.html

    def __repr__(self):
        return self.text


def _caption(data, title):
    m = data["machine"]
    load = f"负载 {m['loadavg_start'][0]:.1f} → {m.get('loadavg_end', m['loadavg_start'])[0]:.1f}"
    merged = ""
    mf = data.get("merged_from")
    if mf:
        merged = f"；部分行取自较早的一次运行（{(mf.get('machine') or {}).get('date', '?')}）"
    return (f"{title}。测于 {m['date']}，{m['cpu']}，{m['cores']} 核，jax {m['jax']}，{load}{merged}；"
            f"来源 {data['_path']}（make bench，页面构建时不重跑）")


def no_bench_note(out_dir=None):
    d = Path(out_dir) if out_dir else bench_dir()
    return f"还没有运行过 make bench（{d} 下没有结果）：运行 `make bench` 或 `.venv/bin/python -m trglab.bench` 后重建本页。"


def bench_table(part="methods", out_dir=None):
    """The table of one part of the latest bench run, or a note when there is none.

    ``part`` in "methods", "compile", "steady", "profile", "onestep", "chi", "gram", "book";
    raises ValueError otherwise.
    """
    if part not in PARTS and part != "book":
        raise ValueError(f"unknown bench part {part!r}; choose one of {', '.join([*PARTS, 'book'])}")
    data = load_latest(out_dir)
    if data is None:
        note = no_bench_note(out_dir)
        html_note = re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(note, quote=False))
        return BenchTable(f'<p class="trglab-note">{html_note}</p>', note)
    if part == "book":
        book = data.get("book", {})
        if "pages" not in book:
            note = f"本次 bench 没有书的构建耗时：{book.get('note', '未记录')}"
            return BenchTable(f'<p class="trglab-note">{note}</p>', note)
        title = f"整本书每页的执行时间（合计 {book['total_s']:.1f} s，最慢一页 {book['max_s']:.1f} s）"
        columns = [("页面", "page", None), ("秒", "seconds", ".1f"), ("状态", "status", None)]
        rows = book["pages"]
    else:
        title, columns = PARTS[part]
        if part == "steady":
            from .bench import steady_rows

            rows = [r for r in steady_rows(data["rows"]) if "error" not in r]
        elif part == "profile":
            from .bench import profile_rows

            rows = [r for r in profile_rows(data["rows"]) if "error" not in r]
        else:
            rows = [r for r in data["rows"] if r.get("part") == part and "error" not in r]
    headers = [h for h, _, _ in columns]
    table_rows = [{h: r.get(k) for h, k, _ in columns} for r in rows]
    fmt = {h: f for h, _, f in columns if f}
    caption = _caption(data, title)
    html = table_html(table_rows, headers, caption=caption, fmt=fmt)
    from .bench import format_table

    text = format_table(rows, [(h, k, f or "") for h, k, f in columns], caption)
    return BenchTable(html, text)


def bench_summary(out_dir=None):
    """The target figures of the latest run (bench.summary), or {} when none has run."""
    data = load_latest(out_dir)
    return {} if data is None else dict(data.get("summary", {}))
