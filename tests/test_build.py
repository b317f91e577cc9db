"""The build fails loudly and loses nothing (tiny notebooks without JAX work, short limits)."""

import json
import re
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from trglab import build as B
from trglab.build_page import parse_parameters

REPO = Path(__file__).resolve().parents[1]


def notebook(path, params_src, body_src, title="# 测试页\n\n这一页只有一个数：梯度在第五步之后开始漂移，$x^2$ 也是。"):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(title),
                nbformat.v4.new_code_cell(params_src, metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(body_src)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


GOOD = ("x = 2", "from trglab.records import write_figure\nwrite_figure('good', 'twice', 2 * x)\nprint(2 * x)")
FAIL = ("n = 3", "print('before')\nraise RuntimeError('deliberate failure for the test')")
HANG = ("t = 1", "import time\nwhile True:\n    time.sleep(0.5)")
BAD_PARAMS = ("chi = 16", "from trglab.page import Page\npage = Page('badparams', chi=chi, show=False)")


def book(tmp_path, pages):
    """A tiny book under tmp_path: pages = {relpath: (params, body)}."""
    root = tmp_path / "book"
    (root / "data" / "expected").mkdir(parents=True)
    shutil.copy(REPO / "_config.yml", root / "_config.yml")
    for folder in ("_ext", "_static"):  # local Sphinx extension and static path named in _config.yml
        shutil.copytree(REPO / folder, root / folder)
    if (REPO / "site_assets").exists():
        (root / "site_assets").symlink_to(REPO / "site_assets")
    files = []
    for rel, (params, body) in pages.items():
        notebook(root / rel, params, body)
        files.append(rel.removesuffix(".ipynb"))
    toc = ["format: jb-book", f"root: {files[0]}"]
    if files[1:]:
        toc += ["parts:", "  - caption: 测试", "    chapters:"] + [f"      - file: {f}" for f in files[1:]]
    (root / "_toc.yml").write_text("\n".join(toc) + "\n", encoding="utf-8")
    (root / "data" / "expected" / "good.json").write_text(json.dumps(
        {"page": "good", "figures": {"twice": {"value": 4, "kind": "exact", "source": "test"}}}), encoding="utf-8")
    return root


def test_toc_pages_in_order_and_missing_file(tmp_path):
    root = book(tmp_path, {"chapters/a.ipynb": GOOD, "chapters/sub/b.ipynb": FAIL})
    assert [str(p) for p in B.toc_pages(root)] == ["chapters/a.ipynb", "chapters/sub/b.ipynb"]
    (root / "chapters/sub/b.ipynb").unlink()
    with pytest.raises(B.BuildError, match="lists 'chapters/sub/b'"):
        B.toc_pages(root)


def test_failing_and_hanging_pages_are_reported_and_others_run(tmp_path, capsys):
    root = book(tmp_path, {"chapters/good.ipynb": GOOD, "chapters/fail.ipynb": FAIL,
                           "chapters/hang.ipynb": HANG})
    rc = B.build(root, timeout=20, site=False)
    out = capsys.readouterr().out
    assert rc == 1
    assert "BUILD FAILED" in out
    block = out[out.index("BUILD FAILED"):]
    assert "chapters/fail.ipynb: failed" in block
    assert "RuntimeError: deliberate failure for the test" in block
    assert "code cell 2" in block and "raise RuntimeError" in block
    assert "chapters/hang.ipynb: timed out" in block and "time limit of 20 s" in block
    assert "code cell 2: `import time`" in block        # the cell that was running
    assert "chapters/good.ipynb" not in block          # the good page ran and is fine
    assert "chapters/good.ipynb" in out and " ok" in out.splitlines()[1]
    assert not (root / "_build" / "results").exists()  # nothing published
    assert not (root / "_build" / "html").exists()


def test_bad_parameters_fail_in_first_code_cell_with_one_line(tmp_path):
    root = book(tmp_path, {"chapters/badparams.ipynb": BAD_PARAMS})
    src = root / "chapters/badparams.ipynb"
    run = B.execute_page(src, tmp_path / "out" / "badparams.ipynb", tmp_path / "res", page="badparams",
                         timeout=120, parameters={"chi": "abc"})
    assert not run.ok and run.status == "failed"
    assert run.error == "ParameterError: parameter chi must be an int >= 2, got 'abc'"
    assert run.cell.startswith("code cell 3")  # params, injected params, then the Page cell
    assert run.parameters["chi"] == "abc"


def test_parse_page_parameters_reads_yaml_values():
    assert parse_parameters([["steps", "8"], ["beta", "0.44"], ["steps_list", "[5, 8]"], ["name", "x"]],
                            ["chi: 32"]) == {"chi": 32, "steps": 8, "beta": 0.44, "steps_list": [5, 8], "name": "x"}
    with pytest.raises(B.BuildError, match="mapping"):
        parse_parameters([], ["[1, 2]"])


def test_finish_staged_notebook_hides_parameters_and_adds_footer(tmp_path):
    path = notebook(tmp_path / "p.ipynb", "steps = 5\nbeta = 0.3", "print(1)")
    nb = json.loads(path.read_text())
    nb["cells"].insert(2, {"cell_type": "code", "id": "inj", "metadata": {"tags": ["injected-parameters"]},
                           "source": "steps = 6", "outputs": [], "execution_count": None})
    path.write_text(json.dumps(nb))
    B.finish_staged_notebook(path, "chapters/p.ipynb", "../about/status.md")
    nb = json.loads(path.read_text())
    tags = [c["metadata"].get("tags", []) for c in nb["cells"]]
    assert "remove-cell" in tags[1] and "remove-cell" in tags[2] and "remove-cell" not in tags[3]
    footer = "".join(nb["cells"][-1]["source"])
    assert "make page PAGE=chapters/p.ipynb" in footer and "-p steps 5" in footer and "../about/status.md" in footer


def test_external_fetches_are_found(tmp_path):
    (tmp_path / "a.html").write_text('<script src="https://cdn.example.org/x.js"></script>'
                                     '<link rel="stylesheet" href="//fonts.example.org/c.css">'
                                     '<link rel="canonical" href="https://book.example.org/a.html">'
                                     '<a href="https://example.org">ok</a><img src="_static/ok.png">')
    assert B.external_fetches(tmp_path) == [("a.html", "https://cdn.example.org/x.js"),
                                            ("a.html", "//fonts.example.org/c.css")]


def test_staging_cleanup_spares_a_running_build(tmp_path):
    build_dir = tmp_path / "_build"
    busy, done = build_dir / "staging" / "busy", build_dir / "staging" / "done"
    busy.mkdir(parents=True)
    done.mkdir(parents=True)
    with B.file_lock(busy / ".building"):
        B.clean_old_staging(build_dir, keep="mine")
    assert busy.exists() and not done.exists()


def test_two_publishes_at_once_leave_one_whole_site(tmp_path):
    import threading

    build_dir = tmp_path / "_build"
    stages = []
    for k in range(2):
        stage = build_dir / "staging" / f"s{k}"
        (stage / "_build" / "html").mkdir(parents=True)
        (stage / "results").mkdir()
        for i in range(50):
            (stage / "_build" / "html" / f"p{i}.html").write_text(f"build {k}")
        (stage / "results" / "page.json").write_text(f'{{"build": {k}}}')
        stages.append(stage)
    threads = [threading.Thread(target=B.publish, args=(build_dir, st, st.name, {})) for st in stages]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    texts = {(build_dir / "html" / f"p{i}.html").read_text() for i in range(50)}
    assert len(texts) == 1  # all pages from the same build
    winner = texts.pop()[-1]
    assert json.loads((build_dir / "results" / "page.json").read_text())["build"] == int(winner)
    assert not list(build_dir.glob(".html.prev-*"))


def test_recover_restores_a_site_after_an_interrupted_publish(tmp_path):
    (tmp_path / ".html.prev-1").mkdir()
    (tmp_path / ".html.prev-1" / "index.html").write_text("old")
    B.recover(tmp_path)
    assert (tmp_path / "html" / "index.html").read_text() == "old"


@pytest.mark.skipif(not (REPO / B.MATHJAX_SRC / "tex-chtml.js").exists(), reason="run scripts/bootstrap.sh first")
def test_good_build_publishes_then_a_failed_one_keeps_it(tmp_path, capsys):
    root = book(tmp_path, {"chapters/good.ipynb": GOOD})
    assert B.build(root, timeout=120) == 0
    html, results = root / "_build" / "html", root / "_build" / "results"
    index = (html / "chapters" / "good.html").read_text(encoding="utf-8")
    assert json.loads((results / "good.json").read_text())["figures"] == {"twice": 4}
    status = (html / "about" / "status.html").read_text(encoding="utf-8")
    repro = (html / "about" / "reproduction.html").read_text(encoding="utf-8")
    assert "执行状态" in status and "chapters/good.ipynb" in status and "x=2" in status
    assert "数字复现" in repro and "twice" in repro and ">ok<" in repro
    assert "make page PAGE=chapters/good.ipynb" in re.sub(r"<[^>]+>", "", index)
    assert "good.ipynb" in index and "download" in index  # the .ipynb download button
    assert (html / "_static" / "mathjax" / "tex-chtml.js").exists()
    assert 'src="../_static/mathjax/tex-chtml.js' in index       # MathJax from the site itself
    assert B.external_fetches(html) == []
    index_js = (html / "searchindex.js").read_text(encoding="utf-8")
    terms = json.loads(index_js[index_js.index("(") + 1: index_js.rindex(")")])["terms"]
    assert "漂移" in terms  # jieba split the Chinese sentence into words (without it: titles only)
    assert not list((root / "_build" / "staging").iterdir())  # a good build cleans its staging
    # break the page: the build fails, the published site and results stay as they were
    notebook(root / "chapters/good.ipynb", *FAIL)
    capsys.readouterr()
    assert B.build(root, timeout=120) == 1
    assert "the last good site and results were kept" in capsys.readouterr().out
    assert (html / "chapters" / "good.html").read_text(encoding="utf-8") == index
    assert json.loads((results / "good.json").read_text())["figures"] == {"twice": 4}


def test_interrupted_build_keeps_the_last_good_results(tmp_path):
    root = book(tmp_path, {"chapters/good.ipynb": GOOD, "chapters/hang.ipynb": HANG})
    for name in ("html", "results"):
        (root / "_build" / name).mkdir(parents=True)
        (root / "_build" / name / "marker.txt").write_text("last good")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "trglab", "build", "--root", str(root), "--timeout", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines = []
    for line in proc.stdout:  # wait until the good page is done and the hanging one runs
        lines.append(line)
        if "chapters/good.ipynb" in line:
            break
    time.sleep(3)
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=60)[0]
    assert proc.returncode == 130, "".join(lines) + rest
    assert "interrupted" in rest and "last good" in rest
    for name in ("html", "results"):
        assert (root / "_build" / name / "marker.txt").read_text() == "last good"
    # no kernel of the hanging page is left behind
    staged = next((root / "_build" / "staging").iterdir())
    assert "hang.ipynb" in str(list(staged.rglob("hang.ipynb")))


def test_time_targets_line():
    from trglab.build import PageRun, time_targets_line

    runs = [PageRun("chapters/a.ipynb", "a", ok=True, seconds=30.0),
            PageRun("chapters/b.ipynb", "b", ok=True, seconds=101.8)]
    line = time_targets_line(runs, 280.0)
    assert "slowest page b 101.8 s" in line and line.endswith("within the targets")
    runs.append(PageRun("chapters/c.ipynb", "c", ok=True, seconds=150.0))
    line = time_targets_line(runs, 700.0)
    assert line.endswith("OVER the targets: c 150.0 s, build 700.0 s")
    assert time_targets_line([], 1.0) == "time: 1.0 s in all, no pages run"
