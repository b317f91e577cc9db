"""``python -m trglab build``: execute every page, build the site, publish it only if all went well.

Steps (root = the repository, ``_build/`` below it)::

    _toc.yml ──> pages ──papermill (one process group per page, time limit)──> _build/staging/<id>/chapters/...
                                                            └─ figures ──> _build/staging/<id>/results/<page>.json
    staged notebooks: parameters cells tagged remove-cell, a "re-run this page" footer
    generated pages: about/status.md (execution status), about/reproduction.md (numbers check)
    jupyter-book build _build/staging/<id> -W --keep-going (execution off)
    all ok ──> _build/html, _build/results, _build/status.json (swapped in under _build/.lock)
    any failure ──> last good _build/html and _build/results stay; one block names page, cell, error

Each build has its own staging folder (``<id>`` = UTC time + pid) holding an fcntl lock
while the build runs, so two builds at once never write the same files; publishing takes
``_build/.lock``. A staging folder is removed after a good build; the latest failed one is
kept for inspection (older unlocked ones are cleaned up).

Environment of a page: ``TRGLAB_RESULTS_DIR`` (the staging results folder),
``TRGLAB_BUILD_ID``, ``TRGLAB_PAGE`` (page id); the kernel is ``python3`` resolved to
the Python that runs the build (the venv's).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .paths import repo_root

DEFAULT_TIMEOUT_S = 300.0
# time targets of the book (issue "Performance"): reported after every build, never enforced
# here (a loaded machine is slower; the per-page time limit above is what stops a hang)
PAGE_TARGET_S = 120.0
BOOK_TARGET_S = 600.0
DEFAULT_SITE_TIMEOUT_S = 900.0
ABOUT_PART = "关于本书的构建"
STATUS_FILE = "about/status"
REPRO_FILE = "about/reproduction"
# copied into staging besides the pages (when present at the root)
EXTRA_SOURCES = ("_static", "_ext", "images", "references.bib", "logo.png", "favicon.ico")
MATHJAX_SRC = Path("site_assets") / "node_modules" / "mathjax" / "es5"


class BuildError(ValueError):
    """A build that cannot even start (bad table of contents, bad arguments): one line."""


class Interrupted(Exception):
    """SIGINT/SIGTERM during a build."""


# --- table of contents ---------------------------------------------------------------------
def _toc_files(node, out):
    if isinstance(node, dict):
        if "file" in node:
            out.append(str(node["file"]))
        for key in ("root", ):
            if key in node:
                out.append(str(node[key]))
        for key in ("parts", "chapters", "sections"):
            for child in node.get(key, []) or []:
                _toc_files(child, out)
    elif isinstance(node, list):
        for child in node:
            _toc_files(child, out)
    return out


def load_toc(root: Path) -> dict:
    import yaml

    path = root / "_toc.yml"
    if not path.exists():
        raise BuildError(f"no _toc.yml in {root}")
    try:
        toc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise BuildError(f"_toc.yml is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(toc, dict) or "root" not in toc:
        raise BuildError("_toc.yml must be a jb-book table of contents with a 'root' entry")
    return toc


def toc_pages(root: Path) -> list[Path]:
    """Source files of the book in table-of-contents order (relative to root).

    A ``file`` entry without suffix resolves to ``.ipynb``, then ``.md``; a missing file is
    an error (one line).
    """
    toc = load_toc(root)
    pages = []
    for entry in _toc_files(toc, []):
        entry = entry.strip()
        candidates = [Path(entry)] if Path(entry).suffix in (".ipynb", ".md") else [
            Path(entry + ".ipynb"), Path(entry + ".md")]
        found = next((c for c in candidates if (root / c).exists()), None)
        if found is None:
            raise BuildError(f"_toc.yml lists {entry!r} but no {' or '.join(map(str, candidates))} exists")
        if found not in pages:
            pages.append(found)
    ids = {}
    for p in pages:
        if p.suffix == ".ipynb":
            if p.stem in ids:
                raise BuildError(f"page id {p.stem!r} is used twice: {ids[p.stem]} and {p}")
            ids[p.stem] = p
    return pages


# --- executing one page ----------------------------------------------------------------------
@dataclass
class PageRun:
    page: str                 # path relative to root, e.g. chapters/trg/ising_trg.ipynb
    page_id: str
    ok: bool = False
    seconds: float = 0.0
    started: str = ""
    status: str = "not run"   # ok | failed | timed out | interrupted
    cell: str = ""            # e.g. "cell 4 (In [3])"
    error: str = ""           # one line
    log: str = ""
    parameters: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)


def _kill_group(proc: subprocess.Popen, grace: float = 3.0) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _code_cells(nb):
    return [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]


def _first_line(text: str, width: int = 200) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= width else line[: width - 1] + "…"


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _raising_line(traceback_lines) -> tuple[str, str]:
    """(line number, source) of the page's own line that raised, from an ipykernel traceback."""
    text = _ANSI.sub("", "\n".join(traceback_lines or []))
    m = re.search(r"Cell In\[\d+\], line (\d+)\n(?:.*\n)*?-+> *\d+ (.*)", text)
    return (m.group(1), m.group(2).strip()) if m else ("", "")


def _cell_label(nb, cell, error_output=None) -> str:
    code = _code_cells(nb)
    n = code.index(cell) + 1 if cell in code else "?"
    count = cell.get("execution_count")
    label = f"code cell {n}" + (f" (In [{count}])" if count else "")
    if error_output is not None:
        line, src = _raising_line(error_output.get("traceback"))
        if src:
            return f"{label}, line {line}: `{_first_line(src, 80)}`"
    src = _first_line("".join(cell.get("source", "")), 60)
    return f"{label}: `{src}`" if src else label


def diagnose(nb: dict) -> tuple[str, str]:
    """(cell, one-line error) of a failed or stopped executed notebook ('' if none found)."""
    for cell in _code_cells(nb):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                evalue = _first_line(out.get("evalue", ""))
                return _cell_label(nb, cell, out), f"{out.get('ename', 'Error')}: {evalue}".rstrip(": ")
    for cell in _code_cells(nb):
        if cell.get("metadata", {}).get("papermill", {}).get("status") == "running":
            return _cell_label(nb, cell), ""
    return "", ""


def parameters_cell_values(nb: dict) -> dict:
    """Assignments of the cell tagged ``parameters`` (literal values; other expressions as text)."""
    import ast

    for cell in nb.get("cells", []):
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            src = "".join(cell.get("source", ""))
            try:
                tree = ast.parse(src)
            except SyntaxError:
                return {}
            out = {}
            for node in tree.body:
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            try:
                                out[target.id] = ast.literal_eval(node.value)
                            except ValueError:
                                out[target.id] = ast.get_source_segment(src, node.value)
            return out
    return {}


def _read_nb(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _utcnow() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


_RUNNING: list[subprocess.Popen] = []


def execute_page(src: Path, out: Path, results_dir: Path, *, page: str, timeout: float,
                 parameters: dict | None = None, kernel: str = "python3", env_extra: dict | None = None,
                 log_path: Path | None = None) -> PageRun:
    """Execute notebook ``src`` into ``out`` with papermill (cwd = ``out``'s folder).

    The papermill process and its kernel run in their own process group; after
    ``timeout`` seconds the group is killed and the page reported as timed out.
    """
    import yaml

    run = PageRun(page=page, page_id=src.stem, started=_utcnow())
    out.parent.mkdir(parents=True, exist_ok=True)
    results_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_path or out.with_suffix(".log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "papermill", str(src), str(out), "--cwd", str(out.parent),
           "-k", kernel, "--no-progress-bar", "--log-level", "WARNING"]
    if parameters:
        pfile = out.with_suffix(".params.yaml")
        pfile.write_text(yaml.safe_dump(parameters, allow_unicode=True), encoding="utf-8")
        cmd += ["-f", str(pfile)]
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["TRGLAB_RESULTS_DIR"] = str(results_dir)
    env["TRGLAB_PAGE"] = src.stem
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    env.update(env_extra or {})
    t0 = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        _RUNNING.append(proc)
        try:
            rc = proc.wait(timeout=timeout)
            run.status = "ok" if rc == 0 else "failed"
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            run.status = "timed out"
        except BaseException:
            _kill_group(proc)
            run.status = "interrupted"
            raise
        finally:
            _RUNNING.remove(proc)
            run.seconds = time.perf_counter() - t0
            run.log = str(log_path)
            _fill_from_output(run, out, log_path, timeout)
    return run


def _fill_from_output(run: PageRun, out: Path, log_path: Path, timeout: float) -> None:
    nb = _read_nb(out)
    if nb is not None:
        meta = nb.get("metadata", {})
        pm = meta.get("papermill", {})
        params = parameters_cell_values(nb)
        params.update(pm.get("default_parameters") or {})
        params.update(pm.get("parameters") or {})
        run.parameters = params
        run.versions = {"papermill": pm.get("version", ""),
                        "python": meta.get("language_info", {}).get("version", "")}
        cell, error = diagnose(nb)
    else:
        cell, error = "", ""
    run.ok = run.status == "ok"
    if run.ok:
        return
    run.cell = cell or "(before the first cell)"
    if run.status == "timed out":
        run.error = f"stopped after the page time limit of {timeout:g} s" + (f" ({error})" if error else "")
    elif run.status == "interrupted":
        run.error = "build interrupted"
    else:
        run.error = error or _log_error(log_path)


def _log_error(log_path: Path) -> str:
    try:
        lines = [ln for ln in log_path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "papermill failed (no log)"
    for ln in reversed(lines):
        if "Error" in ln or "error" in ln:
            return _first_line(ln)
    return _first_line(lines[-1]) if lines else "papermill failed"


# --- staging ---------------------------------------------------------------------------------
def new_build_id() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"


@contextlib.contextmanager
def file_lock(path: Path, blocking: bool = True):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        flags = fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB)
        fcntl.flock(f, flags)
        try:
            f.seek(0)
            f.truncate()
            f.write(f"{os.getpid()}\n")
            f.flush()
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def clean_old_staging(build_dir: Path, keep: str) -> None:
    """Remove staging folders of finished builds (their lock is free), except ``keep``."""
    staging = build_dir / "staging"
    if not staging.is_dir():
        return
    for d in sorted(staging.iterdir()):
        if d.name == keep or not d.is_dir():
            continue
        try:
            with file_lock(d / ".building", blocking=False):
                pass
        except BlockingIOError:
            continue  # another build is using it
        shutil.rmtree(d, ignore_errors=True)


def copy_sources(root: Path, stage: Path, pages: list[Path]) -> None:
    """Config, toc, every non-notebook file beside the pages, extra assets, MathJax."""
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(root / name, stage / name)
    top = sorted({p.parts[0] for p in pages if len(p.parts) > 1})
    ignore = shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints", "__pycache__", "_build")
    for folder in top:
        shutil.copytree(root / folder, stage / folder, ignore=ignore, dirs_exist_ok=True)
    for p in pages:
        if p.suffix != ".ipynb":
            (stage / p).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / p, stage / p)
    for name in EXTRA_SOURCES:
        src = root / name
        if src.is_dir():
            shutil.copytree(src, stage / name, dirs_exist_ok=True)
        elif src.is_file():
            shutil.copy2(src, stage / name)
    mj = root / MATHJAX_SRC
    if mj.is_dir():
        # Served as an "extra path": Jupyter Book adds every .js under _static as a page script.
        shutil.copytree(mj, stage / "_mathjax" / "_static" / "mathjax", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("*.map", "sre", "node-main*", "*-full*", "*svg*", "mml-*",
                                                      "tex-mml-*", "latest.js"))


def mathjax_missing(root: Path) -> str | None:
    if not (root / MATHJAX_SRC / "tex-chtml.js").exists():
        return (f"offline MathJax not found at {MATHJAX_SRC}/tex-chtml.js "
                f"(run scripts/bootstrap.sh, which installs npm mathjax@3 into site_assets/)")
    return None


RERUN_FOOTER = """---

**在本地重跑本页。** 在仓库根目录运行

```bash
make page PAGE={page}
```

换参数时加上 `ARGS="-p 名字 值"`（例如 `ARGS="{example}"`），结果写进 `_build/runs/`。也可以用页首的下载按钮取得本页的 `.ipynb`，在装好 `trglab` 的环境（`make venv`）里用 Jupyter 打开运行。本页这次构建的参数、耗时和版本见[执行状态]({status})。
"""


def finish_staged_notebook(path: Path, page: str, status_rel: str) -> None:
    """Tag the parameters/injected-parameters cells remove-cell; append the re-run footer."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    example = "-p steps 8"
    for cell in nb.get("cells", []):
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if "parameters" in tags or "injected-parameters" in tags:
            if "remove-cell" not in tags:
                tags.append("remove-cell")
            if "parameters" in tags:
                first = _first_assignment("".join(cell.get("source", "")))
                if first:
                    example = f"-p {first[0]} {first[1]}"
    footer = RERUN_FOOTER.format(page=page, example=example, status=status_rel)
    nb["cells"].append({"cell_type": "markdown", "id": "trglab-rerun-footer", "metadata": {},
                        "source": footer.splitlines(keepends=True)})
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _first_assignment(src: str):
    import ast

    try:
        tree = ast.parse(src)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return node.targets[0].id, value
    return None


# --- generated pages -------------------------------------------------------------------------
def _md_cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(columns, rows) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(_md_cell(c) for c in r) + " |")
    return "\n".join(lines)


def environment_versions() -> dict:
    import platform

    out = {"Python": sys.version.split()[0], "OS": platform.platform()}
    for mod in ("jax", "jaxlib", "numpy", "papermill", "jupyter_book", "myst_nb", "sphinx"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 (a missing module is shown as such)
            out[mod] = "—"
    return out


def status_markdown(runs: list[PageRun], build_id: str, env_versions: dict) -> str:
    ok = sum(r.ok for r in runs)
    rows = []
    for r in runs:
        params = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in r.parameters.items()) or "—"
        verdict = "ok" if r.ok else f"**{r.status}**: {r.cell} — {r.error}"
        rows.append([f"`{r.page}`", r.started, f"{r.seconds:.1f}", params,
                     f"papermill {r.versions.get('papermill', '—')}, Python {r.versions.get('python', '—')}", verdict])
    env_rows = [[k, v] for k, v in env_versions.items()]
    return "\n\n".join([
        "# 执行状态",
        f"这一页由构建程序生成（构建 `{build_id}`）：每个页面都由 papermill 从头执行了一遍，"
        f"下表是每页开始的时间、用了多少秒、用的参数（默认值加上注入的值，取自 papermill 写进 notebook 的元数据）"
        f"和结果。本次共 {len(runs)} 页，{ok} 页成功。",
        _md_table(["页面", "开始（UTC）", "秒", "参数", "执行环境", "结果"], rows),
        "## 构建环境",
        "执行页面的内核和构建程序用的是同一个 Python 环境（`.venv/`）：",
        _md_table(["组件", "版本"], env_rows),
    ]) + "\n"


def reproduction_markdown(rows, counts: dict, build_id: str, page_links: dict | None = None) -> str:
    """The numbers check as a page: a summary, then one table per page (failures first)."""
    page_links = page_links or {}
    summary = "，".join(f"{k} {v} 个" for k, v in sorted(counts.items())) or "没有数字"
    parts = [
        "# 数字复现",
        f"这一页由构建程序生成（构建 `{build_id}`）。每个页面把关键数字写进本次构建的结果，"
        "构建结束前逐个和 `data/expected/` 里记下的值对照：“记录值”是 `data/expected/` 里的数，"
        "“本次构建”是刚算出来的，“容差”是允许的差，“出处”说明记录值从哪里来（哪个种子页、哪台机器、哪个版本）。"
        "形状类（shape）的数字记的是规则（比如相邻两步的比值小于某个数），不是某个值；"
        "unstable 类记的是随机器变化的数：能写成规则的按规则核对，其余只显示（not compared），"
        "它们要满足的性质由同页的另一个数核对。",
        f"本次结果：{summary}。命令行里同样的表：`python -m trglab check`。",
    ]
    by_page: dict[str, list] = {}
    for r in rows:
        by_page.setdefault(r.page, []).append(r)
    order = sorted(by_page, key=lambda p: (not any(r.failed for r in by_page[p]), p))
    for page in order:
        prs = by_page[page]
        n_ok = sum(r.verdict == "ok" for r in prs)
        link = page_links.get(page)
        title = f"[{page}]({link})" if link else f"`{page}`"
        parts.append(f"## {page}")
        parts.append(f"页面 {title}：{len(prs)} 个数，{n_ok} 个在容差内复现。")
        parts.append(_md_table(
            ["数字", "记录值", "本次构建", "容差", "结论", "出处"],
            [[f"`{r.figure}`", r.recorded, r.fresh, r.tolerance,
              f"**{r.verdict}**（{r.detail}）" if r.failed else r.verdict, r.source] for r in prs]))
    return "\n\n".join(parts) + "\n"


def staged_toc(stage: Path) -> None:
    import yaml

    path = stage / "_toc.yml"
    toc = yaml.safe_load(path.read_text(encoding="utf-8"))
    part = {"caption": ABOUT_PART, "chapters": [{"file": STATUS_FILE}, {"file": REPRO_FILE}]}
    if "parts" in toc:
        toc["parts"].append(part)
    else:
        toc["parts"] = [{"chapters": toc.pop("chapters", [])}, part] if toc.get("chapters") else [part]
    path.write_text(yaml.safe_dump(toc, allow_unicode=True, sort_keys=False), encoding="utf-8")


# --- the site --------------------------------------------------------------------------------
def build_site(stage: Path, timeout: float, log_path: Path) -> tuple[bool, list[str]]:
    """jupyter-book build <stage> -W --keep-going; (ok, warning/error lines)."""
    jb = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(stage), "-W", "--keep-going"]
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["NO_COLOR"] = "1"
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        _RUNNING.append(proc)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            rc = -1
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            _RUNNING.remove(proc)
    text = log_path.read_text(encoding="utf-8", errors="replace")
    text = _ANSI.sub("", text)
    problems = [ln.strip() for ln in text.splitlines() if "WARNING" in ln or "ERROR" in ln or "Error" in ln]
    if rc == -1:
        problems.append(f"jupyter-book build stopped after {timeout:g} s")
    ok = rc == 0 and (stage / "_build" / "html" / "index.html").exists()
    if ok:
        fetches = external_fetches(stage / "_build" / "html")
        for page, url in fetches[:20]:
            problems.append(f"{page} fetches {url} from outside the site (the site must work offline)")
        ok = not fetches
    if not ok and not problems:
        problems.append(_first_line(text.strip().splitlines()[-1]) if text.strip() else f"exit status {rc}")
    return ok, problems


_FETCH = re.compile(r"""<(?:script|img|iframe|source|audio|video)\b[^>]*?\bsrc\s*=\s*["']([^"']+)["']"""
                    r"""|<link\b[^>]*?\bhref\s*=\s*["']([^"']+)["'][^>]*>""", re.I)


def external_fetches(html_dir: Path) -> list[tuple[str, str]]:
    """(page, url) for every resource a built page loads from outside the site.

    Scripts, images, frames and ``<link>`` resources (stylesheets, icons, preloads) whose
    URL has a scheme (``https:``) or starts with ``//``. Plain ``<a href>`` links are fine.
    """
    found = []
    for page in sorted(html_dir.rglob("*.html")):
        text = page.read_text(encoding="utf-8", errors="replace")
        for m in _FETCH.finditer(text):
            url = m.group(1) or m.group(2)
            tag = m.group(0)
            if m.group(2) and re.search(r"""rel\s*=\s*["'](?:canonical|next|prev|alternate|author|license)""", tag, re.I):
                continue
            if re.match(r"^(?:[a-z][a-z0-9+.-]*:|//)", url, re.I) and not url.startswith(("data:", "blob:")):
                found.append((str(page.relative_to(html_dir)), url))
    return found


# --- publishing ------------------------------------------------------------------------------
def recover(build_dir: Path) -> None:
    """Undo a publish interrupted between its two renames (restore the previous site)."""
    for name in ("html", "results"):
        target = build_dir / name
        prev = sorted(build_dir.glob(f".{name}.prev-*"))
        if not target.exists() and prev:
            os.replace(prev[-1], target)
            prev = prev[:-1]
        for p in prev:
            shutil.rmtree(p, ignore_errors=True)


def publish(build_dir: Path, stage: Path, build_id: str, extra: dict[str, str]) -> None:
    """Swap the staged site and results into _build/ (under _build/.lock)."""
    with file_lock(build_dir / ".lock"):
        recover(build_dir)
        for name, src in (("html", stage / "_build" / "html"), ("results", stage / "results")):
            target = build_dir / name
            prev = build_dir / f".{name}.prev-{build_id}"
            if target.exists():
                os.replace(target, prev)
            os.replace(src, target)
            shutil.rmtree(prev, ignore_errors=True)
        for name, text in extra.items():
            fd, tmp = tempfile.mkstemp(dir=build_dir, prefix=f".{name}.")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, build_dir / name)


# --- the whole build -------------------------------------------------------------------------
def _on_signal(signum, frame):  # noqa: ARG001
    raise Interrupted(signal.Signals(signum).name)


def failure_block(runs: list[PageRun], site_problems: list[str], stage: Path, kept: bool) -> str:
    lines = ["", "BUILD FAILED"]
    for r in runs:
        if not r.ok and r.status != "not run":
            lines.append(f"  {r.page}: {r.status}")
            lines.append(f"      cell:  {r.cell}")
            lines.append(f"      error: {r.error}")
            lines.append(f"      log:   {r.log}")
    if site_problems:
        lines.append(f"  jupyter-book build: {len(site_problems)} warning(s)/error(s), first ones:")
        lines += [f"      {p[:240]}" for p in site_problems[:5]]
        lines.append(f"      log:   {stage / 'jupyter-book.log'}")
    lines.append(f"  staged copy kept for inspection: {stage}")
    lines.append("  the last good site and results were kept: _build/html, _build/results" if kept
                 else "  there is no earlier good build in _build/html")
    return "\n".join(lines)


def build(root: Path | None = None, *, timeout: float = DEFAULT_TIMEOUT_S,
          site_timeout: float = DEFAULT_SITE_TIMEOUT_S, only: list[str] | None = None,
          kernel: str = "python3", site: bool = True, out=None) -> int:
    """Run the whole build; returns the exit status (0 ok, 1 failed, 130 interrupted)."""
    out = out or sys.stdout
    root = Path(root or repo_root()).resolve()
    build_dir = root / "_build"
    pages = toc_pages(root)
    notebooks = [p for p in pages if p.suffix == ".ipynb"]
    if only:
        wanted = set(only)
        notebooks = [p for p in notebooks if p.stem in wanted or str(p) in wanted]
        if not notebooks:
            raise BuildError(f"--only matches no page of _toc.yml: {', '.join(only)}")
    if site:
        missing = mathjax_missing(root)
        if missing:
            raise BuildError(missing)
    build_id = new_build_id()
    stage = build_dir / "staging" / build_id
    stage.mkdir(parents=True)
    old = {s: signal.signal(s, _on_signal) for s in (signal.SIGTERM, signal.SIGHUP)}
    runs: list[PageRun] = [PageRun(page=str(p), page_id=p.stem) for p in notebooks]
    t_start = time.perf_counter()
    try:
        with file_lock(stage / ".building"):
            clean_old_staging(build_dir, keep=build_id)
            print(f"build {build_id}: {len(notebooks)} page(s), time limit {timeout:g} s per page, "
                  f"staging {stage.relative_to(root)}", file=out, flush=True)
            copy_sources(root, stage, pages)
            results = stage / "results"
            for i, p in enumerate(notebooks):
                run = execute_page(root / p, stage / p, results, page=str(p), timeout=timeout, kernel=kernel,
                                   env_extra={"TRGLAB_BUILD_ID": build_id}, log_path=stage / "logs" / f"{p.stem}.log")
                runs[i] = run
                verdict = "ok" if run.ok else f"{run.status.upper()}  {run.cell}: {run.error}"
                print(f"[{i + 1}/{len(notebooks)}] {str(p):<48} {run.seconds:7.1f} s  {verdict}", file=out, flush=True)
            return _finish(root, build_dir, stage, build_id, runs, pages, site, site_timeout, t_start, out,
                           publish_ok=site and not only)
    except (KeyboardInterrupt, Interrupted) as exc:
        for proc in list(_RUNNING):
            _kill_group(proc)
        print(f"\nbuild {build_id} interrupted ({exc or 'SIGINT'}); the last good _build/html and "
              f"_build/results were kept; staged copy: {stage}", file=out, flush=True)
        return 130
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def time_targets_line(runs: list[PageRun], total: float) -> str:
    """One line: the slowest page and the whole build against PAGE_TARGET_S / BOOK_TARGET_S."""
    if not runs:
        return f"time: {total:.1f} s in all, no pages run"
    slow = max(runs, key=lambda r: r.seconds)
    over = [r for r in runs if r.seconds > PAGE_TARGET_S]
    verdict = ("within the targets" if not over and total <= BOOK_TARGET_S else
               "OVER the targets: " + ", ".join(
                   [f"{r.page_id} {r.seconds:.1f} s" for r in over]
                   + ([f"build {total:.1f} s"] if total > BOOK_TARGET_S else [])))
    return (f"time: slowest page {slow.page_id} {slow.seconds:.1f} s (target {PAGE_TARGET_S:g} s), "
            f"build {total:.1f} s (target {BOOK_TARGET_S:g} s): {verdict}")


def _finish(root, build_dir, stage, build_id, runs, pages, site, site_timeout, t_start, out, publish_ok=True) -> int:
    from . import check

    failed = [r for r in runs if not r.ok]
    status_rel_base = stage / STATUS_FILE
    for r in runs:
        staged = stage / r.page
        if staged.exists():
            rel = os.path.relpath(status_rel_base.with_suffix(".md"), staged.parent)
            finish_staged_notebook(staged, r.page, rel)
    # the numbers check on this build's results, for the reproduction page and _build/check.json
    expected = check.load_expected(root / "data" / "expected")
    fresh = check.read_results(stage / "results")
    rows = check.check(fresh, expected, partial=False)
    built_ids = {Path(p).stem: p for p in pages if Path(p).suffix == ".ipynb"}
    for r in rows:
        if r.verdict == check.NOT_PRODUCED and r.page not in built_ids:
            r.detail = "page is not in _toc.yml"
    counts = check.summary(rows)
    page_links = {pid: os.path.relpath(stage / p, stage / "about") for pid, p in built_ids.items()}
    env_versions = environment_versions()
    (stage / "about").mkdir(exist_ok=True)
    (stage / f"{STATUS_FILE}.md").write_text(status_markdown(runs, build_id, env_versions), encoding="utf-8")
    (stage / f"{REPRO_FILE}.md").write_text(reproduction_markdown(rows, counts, build_id, page_links), encoding="utf-8")
    staged_toc(stage)
    status_doc = {"build_id": build_id, "pages": [asdict(r) for r in runs], "environment": env_versions}
    (stage / "status.json").write_text(json.dumps(status_doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

    site_ok, problems = True, []
    if site:
        t0 = time.perf_counter()
        site_ok, problems = build_site(stage, site_timeout, stage / "jupyter-book.log")
        print(f"site: jupyter-book build {time.perf_counter() - t0:.1f} s  "
              f"{'ok' if site_ok else 'FAILED (' + str(len(problems)) + ' warning(s)/error(s))'}", file=out, flush=True)
    total = time.perf_counter() - t_start
    print(time_targets_line(runs, total), file=out, flush=True)
    if failed or not site_ok:
        kept = (build_dir / "html" / "index.html").exists()
        print(failure_block(runs, problems if not site_ok else [], stage, kept), file=out, flush=True)
        print(f"build {build_id} failed after {total:.1f} s", file=out, flush=True)
        return 1
    if not publish_ok:
        print(f"build {build_id} ok in {total:.1f} s (partial: --only/--no-site, not published); "
              f"staged copy: {stage}", file=out, flush=True)
        return 0
    publish(build_dir, stage, build_id, {"status.json": json.dumps(status_doc, indent=1, ensure_ascii=False) + "\n"})
    shutil.rmtree(stage, ignore_errors=True)
    print(f"build {build_id} ok in {total:.1f} s: site in _build/html, figures in _build/results", file=out)
    print("view it:  python3 -m http.server -d _build/html 8000   then open http://127.0.0.1:8000/", file=out, flush=True)
    return 0


# --- command line ----------------------------------------------------------------------------
def add_arguments(parser):
    parser.add_argument("--root", default=None, help="book root (default: the repository)")
    parser.add_argument("--timeout", type=float, default=float(os.environ.get("TRGLAB_PAGE_TIMEOUT", DEFAULT_TIMEOUT_S)),
                        help=f"time limit per page in seconds (env TRGLAB_PAGE_TIMEOUT, default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--site-timeout", type=float, default=DEFAULT_SITE_TIMEOUT_S,
                        help="time limit of the jupyter-book step in seconds")
    parser.add_argument("--only", default=None, help="comma-separated page ids to execute (development)")
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel name (default python3)")
    parser.add_argument("--no-site", action="store_true", help="execute the pages only, skip jupyter-book")


def run(args) -> int:
    if args.timeout <= 0 or args.site_timeout <= 0:
        raise BuildError("--timeout and --site-timeout must be > 0")
    only = [s.strip() for s in args.only.split(",") if s.strip()] if args.only else None
    return build(args.root, timeout=args.timeout, site_timeout=args.site_timeout, only=only,
                 kernel=args.kernel, site=not args.no_site)
