"""Browser test of the built site: fixtures and helpers (pytest marker ``browser``).

The test serves ``_build/html`` on 127.0.0.1 and drives Debian's ``/usr/bin/chromium``
headless through Playwright for Python (no browser download: ``executable_path`` is given).

When it runs
------------
Tests marked ``browser`` are skipped in the default ``make test`` run (``pytest`` with the
``testpaths`` of pyproject.toml). They run when

* ``TRGLAB_BROWSER=1`` is set, or
* the tests are named explicitly on the command line, e.g. ``pytest tests/browser``
  (what ``make browser-test`` and ``.ci/run`` do, after ``make book``).

``TRGLAB_BROWSER=0`` skips them even when named.

Paths (environment overrides; defaults under the book root = the repository)::

    TRGLAB_BOOK_ROOT        the repository     _toc.yml and the source notebooks (chapters/...)
    TRGLAB_SITE_DIR         _build/html          the site
    TRGLAB_SITE_RESULTS     _build/results       <page>.json: {"page":..., "figures": {name: value}}
    TRGLAB_SCREENSHOTS_DIR  _build/screenshots   <page>.png written by the test
    TRGLAB_CHROMIUM         /usr/bin/chromium
"""

from __future__ import annotations

import ast
import functools
import http.server
import json
import os
import re
import socketserver
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BOOK = Path(os.environ.get("TRGLAB_BOOK_ROOT", ROOT))
SITE = Path(os.environ.get("TRGLAB_SITE_DIR", BOOK / "_build" / "html"))
RESULTS = Path(os.environ.get("TRGLAB_SITE_RESULTS", BOOK / "_build" / "results"))
SHOTS = Path(os.environ.get("TRGLAB_SCREENSHOTS_DIR", BOOK / "_build" / "screenshots"))
CHROMIUM = os.environ.get("TRGLAB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
NAV_TIMEOUT_MS = 60_000
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


# --- when the browser tests run ----------------------------------------------------------------
def pytest_configure(config):
    config.addinivalue_line("markers", "browser: drives headless chromium over the built site "
                                       "(run: make browser-test, after make book)")


def _named_explicitly(config) -> bool:
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return False
    for arg in config.args:
        path = Path(str(arg).split("::", 1)[0])
        path = path if path.is_absolute() else Path(config.invocation_params.dir) / path
        try:
            path.resolve().relative_to(HERE)
            return True
        except ValueError:
            continue
    return False


def browser_enabled(config) -> bool:
    flag = os.environ.get("TRGLAB_BROWSER")
    if flag is not None and flag.strip() in ("0", "1"):
        return flag.strip() == "1"
    return _named_explicitly(config)


def pytest_collection_modifyitems(config, items):
    if browser_enabled(config):
        return
    skip = pytest.mark.skip(reason="browser test: run `make browser-test` (or `pytest tests/browser`, "
                                   "or set TRGLAB_BROWSER=1) after `make book`")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


# --- the site's pages ---------------------------------------------------------------------------
class _LinkCollector(HTMLParser):
    """Hrefs of <a> inside elements whose class contains ``scope_class`` (or everywhere)."""

    def __init__(self, scope_class=None):
        super().__init__(convert_charrefs=True)
        self.scope_class = scope_class
        self.stack = []  # True for an element that opens the scope
        self.depth = 0
        self.hrefs = []
        self.refresh = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "meta" and (a.get("http-equiv") or "").lower() == "refresh":
            m = re.search(r"url=(.+)", a.get("content") or "", re.I)
            if m:
                self.refresh = m.group(1).strip().strip("'\"")
        void = tag in ("meta", "link", "img", "br", "hr", "input", "source", "col", "area", "base", "wbr")
        opens = bool(self.scope_class) and self.scope_class in (a.get("class") or "").split()
        if tag == "a" and (self.depth or not self.scope_class) and a.get("href"):
            self.hrefs.append(a["href"])
        if not void:
            self.stack.append(opens)
            self.depth += opens

    def handle_endtag(self, tag):
        if self.stack and tag not in ("meta", "link", "img", "br", "hr", "input"):
            self.depth -= self.stack.pop()


def _parse(path: Path, scope_class=None) -> _LinkCollector:
    p = _LinkCollector(scope_class)
    p.feed(path.read_text(encoding="utf-8", errors="replace"))
    return p


def root_page() -> str:
    """Site-relative path of the root page (``index.html`` or the page it redirects to)."""
    index = SITE / "index.html"
    refresh = _parse(index).refresh
    if refresh and not refresh.startswith(("http:", "https:")):
        return urllib.parse.urlsplit(refresh).path.lstrip("./") or "index.html"
    return "index.html"


def site_pages() -> list[str]:
    """Site-relative .html paths: the root page, then every page in its sidebar (toc order)."""
    root = root_page()
    pages = [root]
    base = urllib.parse.urljoin("http://site/", root)
    for href in _parse(SITE / root, "bd-docs-nav").hrefs:
        url = urllib.parse.urljoin(base, href)
        parts = urllib.parse.urlsplit(url)
        if parts.netloc != "site" or not parts.path.endswith(".html"):
            continue
        rel = parts.path.lstrip("/")
        if rel not in pages:
            pages.append(rel)
    return pages


def page_id(rel: str) -> str:
    return Path(rel).stem


def page_params():
    """Parameters for the per-page tests (collection time); one failing entry when there is no site."""
    if not (SITE / "index.html").is_file():
        return [pytest.param(None, id="no-site")]
    try:
        return [pytest.param(rel, id=page_id(rel)) for rel in site_pages()]
    except (OSError, ValueError) as exc:
        return [pytest.param(f"<unreadable: {exc}>", id="unreadable-site")]


def require_site():
    if not (SITE / "index.html").is_file():
        pytest.fail(f"no site at {SITE}/index.html: build it first with `make book`", pytrace=False)


# --- notebooks behind a page ----------------------------------------------------------------------
def source_notebook(rel: str) -> Path | None:
    """The repository notebook a page is built from (None for generated pages)."""
    path = BOOK / Path(rel).with_suffix(".ipynb")
    return path if path.is_file() else None


def executed_notebook(rel: str) -> Path | None:
    """The executed notebook the site offers for download (``_sources/<page>.ipynb``)."""
    path = SITE / "_sources" / Path(rel).with_suffix(".ipynb")
    return path if path.is_file() else None


def load_nb(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _src(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def _tags(cell) -> list:
    return cell.get("metadata", {}).get("tags", []) or []


def shown_cells(nb: dict):
    """Cells that reach the page (not tagged remove-cell)."""
    return [c for c in nb.get("cells", []) if "remove-cell" not in _tags(c)]


def _outputs_shown(cell) -> list:
    if cell.get("cell_type") != "code" or "remove-output" in _tags(cell):
        return []
    return cell.get("outputs", []) or []


def count_outputs(nb: dict) -> dict:
    """How many trglab tables, flowcharts and PNG plots the executed notebook shows."""
    tables = flowcharts = images = 0
    for cell in shown_cells(nb):
        for out in _outputs_shown(cell):
            data = out.get("data", {}) or {}
            if "scrapbook" in (out.get("metadata") or {}):
                continue  # glue outputs are not shown where they are made
            html = data.get("text/html", "")
            html = "".join(html) if isinstance(html, list) else html
            tables += len(re.findall(r'<table[^>]*class="[^"]*\btrglab-table\b', html))
            flowcharts += len(re.findall(r'<div[^>]*class="[^"]*\btrglab-flowchart\b', html))
            if "image/png" in data and not html:
                images += 1
    return {"tables": tables, "flowcharts": flowcharts, "images": images}


def glue_values(nb: dict) -> dict:
    """name -> glued text/plain, from the executed notebook's myst-nb glue outputs."""
    out = {}
    for cell in nb.get("cells", []):
        for o in cell.get("outputs", []) or []:
            scrap = (o.get("metadata") or {}).get("scrapbook") or {}
            name = scrap.get("name")
            if name is not None:
                text = (o.get("data") or {}).get(scrap.get("mime_prefix", "") + "text/plain", "")
                out[name] = "".join(text) if isinstance(text, list) else text
    return out


GLUE_ROLE = re.compile(r"\{glue(?::(text|any|md|figure))?\}`([^`]+)`")


def glue_refs(nb: dict) -> list[tuple[str, str | None]]:
    """``{glue:text}`` references in the prose, in page order: (key, format spec or None, "text").

    A key from another page keeps its ``doc::`` prefix (its value is not in this notebook).
    """
    refs = []
    for cell in shown_cells(nb):
        if cell.get("cell_type") != "markdown":
            continue
        for kind, body in GLUE_ROLE.findall(_src(cell)):
            if kind != "text":  # {glue} / {glue:any} render by mime type, not as span.pasted-text
                continue
            doc, _, rest = body.rpartition("::")
            key, _, fmt = rest.partition(":")
            refs.append(((doc + "::" if doc else "") + key.strip(), fmt.strip() or None, kind))
    return refs


# --- flowchart labels from the source notebook ------------------------------------------------------
_PLACEHOLDER = "\x00"
_LABEL = re.compile(r'"([^"\n]*)"')
_BR = re.compile(r"<br\s*/?>", re.I)


def _string_arg(node) -> str | None:
    """A str constant, or an f-string with its placeholders replaced by a marker."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else _PLACEHOLDER for v in node.values)
    return None


def flowchart_calls(nb: dict) -> list[tuple[str, str]]:
    """(name, mermaid source) of each ``page.flowchart(src, name)`` / ``flowchart.show`` call."""
    calls = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code" or "flowchart" not in _src(cell):
            continue
        try:
            tree = ast.parse(_src(cell))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("flowchart", "show", "Flowchart") and len(node.args) >= 2):
                src, name = _string_arg(node.args[0]), node.args[1]
                if src is not None and isinstance(name, ast.Constant) and isinstance(name.value, str):
                    calls.append((name.value, src))
    return calls


def expected_labels(mermaid: str) -> list[str]:
    """Text fragments of the quoted node labels (split at <br/> and f-string placeholders)."""
    frags = []
    for label in _LABEL.findall(mermaid):
        for piece in _BR.split(label):
            for frag in piece.split(_PLACEHOLDER):
                frag = frag.strip()
                if frag and frag not in frags:
                    frags.append(frag)
    return frags


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text or "")


# --- glued figures against _build/results ---------------------------------------------------------
_NUM = re.compile(r"^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?(%?)$")


def parse_printed(text: str) -> tuple[float, float]:
    """A printed number and half a unit in its last printed digit: ``'1.2e-05'`` -> (1.2e-05, 5e-07)."""
    t = text.strip().replace("\u2212", "-").replace(",", "")
    if t in ("NaN", "nan"):
        return float("nan"), 0.0
    if t.lstrip("+-") in ("inf", "Infinity"):
        return float(t.replace("Infinity", "inf")), 0.0
    m = _NUM.match(t)
    if not m or not (m.group(2) or m.group(3)):
        raise ValueError(f"not a number: {text!r}")
    sign, whole, frac, exp, pct = m.groups()
    frac = frac or ""
    e = int(exp or 0) - (2 if pct else 0)
    value = float(f"{sign}{whole or '0'}.{frac or '0'}e{e}")
    half_ulp = 0.5 * 10.0 ** (e - len(frac))
    return value, half_ulp


def figure_mismatch(text: str, value) -> str | None:
    """None when the glued text shows ``value`` (to its printed digits), else why not."""
    text = text.strip()
    if isinstance(value, list):
        parts = text.split(", ") if text not in ("", "无") else []  # an empty list is shown as 无
        if len(parts) != len(value):
            return f"{len(parts)} items shown, {len(value)} in results"
        for i, (p, v) in enumerate(zip(parts, value)):
            why = figure_mismatch(p, v)
            if why:
                return f"item {i}: {why}"
        return None
    if isinstance(value, bool):
        shown = {"是": True, "否": False, "True": True, "False": False}.get(text)
        return None if shown is value else f"shows {text!r}, results say {value}"
    if isinstance(value, (int, float)):
        try:
            x, tol = parse_printed(text)
        except ValueError as exc:
            return str(exc)
        if isinstance(value, int) and "." not in text and "e" not in text.lower() and "%" not in text:
            return None if x == value else f"shows {text}, results say {value}"
        v = float(value)
        if v != v:
            return None if x != x else f"shows {text}, results say NaN"
        tol = tol * (1 + 1e-9) + 4 * abs(v) * 2.0 ** -52
        return None if abs(x - v) <= tol else f"shows {text}, results say {value!r} (|diff| {abs(x - v):.3g} > {tol:.3g})"
    if value is None:
        return None if text in ("", "None") else f"shows {text!r}, results say null"
    return None if text == str(value) else f"shows {text!r}, results say {value!r}"


def intended_text(plain: str) -> str:
    """What a glue output means to show: its text/plain, unquoted when that is a str literal."""
    try:
        value = ast.literal_eval(plain)
    except (SyntaxError, ValueError):
        return plain
    return value if isinstance(value, str) else plain


def literal_text(plain: str) -> str:
    """How myst-nb's ``{glue:text}`` shows a glued text/plain: ``str(literal_eval(text))`` when it parses."""
    try:
        return str(ast.literal_eval(plain))
    except (SyntaxError, ValueError):
        return plain


def same_number(a: str, b: str) -> bool:
    """Two printed numbers with the same value ('0.84405407362385' and '0.844054073623850')."""
    try:
        return parse_printed(a)[0] == parse_printed(b)[0]
    except ValueError:
        return False


@functools.lru_cache(maxsize=None)
def results_for(pid: str) -> dict | None:
    path = RESULTS / f"{pid}.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get("figures", {})


# --- serving the site --------------------------------------------------------------------------------
class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture(scope="session")
def site_url():
    """Base URL of ``_build/html`` served on 127.0.0.1 (a free port, a daemon thread)."""
    require_site()
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="site-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def http_status(url: str) -> int:
    """Status of a GET to the local server (no redirects followed beyond urllib's default)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


# --- the browser --------------------------------------------------------------------------------------
@dataclass
class Visit:
    """What one page load showed: everything the per-page tests check."""

    rel: str
    url: str
    status: int | None = None
    console_errors: list = field(default_factory=list)
    page_errors: list = field(default_factory=list)
    external: list = field(default_factory=list)     # requests that would leave 127.0.0.1
    bad_local: list = field(default_factory=list)    # local requests that failed or got >= 400
    dom: dict = field(default_factory=dict)
    screenshot: Path | None = None


DOM_SCRIPT = r"""
() => {
  const art = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const abs = (a) => a.href;
  const fc = {};
  for (const d of document.querySelectorAll('div.trglab-flowchart')) {
    const svg = d.querySelector('svg');
    fc[d.id || ('#' + Object.keys(fc).length)] = svg ? {text: svg.textContent,
      width: svg.getBoundingClientRect().width, height: svg.getBoundingClientRect().height} : null;
  }
  const imgs = [...art.querySelectorAll('.cell_output img, .output img')].map(i => ({
      src: i.currentSrc || i.src, ok: i.complete && i.naturalWidth > 0}));
  const paras = [...art.querySelectorAll('p')]
      .filter(p => !p.closest('.cell_output, .output, table, pre, .trglab-flowchart, footer, .admonition'))
      .map(p => p.innerText);
  return {
    title: document.title,
    h1: (art.querySelector('h1') || {}).innerText || '',
    flowcharts: fc,
    raw_svg: [...art.querySelectorAll('.cell_output pre, .output pre')].map(p => p.textContent)
        .filter(t => t.includes('<svg')).map(t => t.slice(0, 80)),
    tables: art.querySelectorAll('table.trglab-table').length,
    table_rows: [...art.querySelectorAll('table.trglab-table')].map(t => t.querySelectorAll('tbody tr').length),
    images: imgs,
    glued: [...art.querySelectorAll('span.pasted-text')].map(s => s.textContent),
    sidebar: [...document.querySelectorAll('nav.bd-docs-nav a[href], .navbar-brand[href]')].map(abs),
    content_links: [...art.querySelectorAll('a[href]')].map(abs),
    downloads: [...document.querySelectorAll('a[href$=".ipynb"]')].map(abs),
    paragraphs: paras,
    text: art.innerText,
    mathjax: !!(window.MathJax && window.MathJax.version),
  };
}
"""


class Browser:
    """One headless chromium for the session; ``visit(rel)`` loads a page once and caches it."""

    def __init__(self, base_url: str):
        from playwright.sync_api import sync_playwright

        if not Path(CHROMIUM).exists():
            pytest.fail(f"no chromium at {CHROMIUM} (Debian package `chromium`; never `playwright install`)",
                        pytrace=False)
        self.base = base_url
        self.host = urllib.parse.urlsplit(base_url).netloc
        self._pw = sync_playwright().start()
        self.browser = self._pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        self.context = self.browser.new_context(viewport={"width": 1280, "height": 900}, locale="zh-CN",
                                                service_workers="block")
        self.context.set_default_timeout(NAV_TIMEOUT_MS)
        self.external: list[str] = []
        self.context.route("**/*", self._route)
        self.cache: dict[str, Visit] = {}

    def is_local(self, url: str) -> bool:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme in ("data", "blob", "about"):
            return True
        return parts.scheme in ("http", "https", "ws", "wss") and parts.netloc == self.host

    def _route(self, route):
        url = route.request.url
        if self.is_local(url):
            route.continue_()
        else:
            self.external.append(url)
            route.abort("blockedbyclient")

    def new_page(self):
        return self.context.new_page()

    def visit(self, rel: str) -> Visit:
        if rel in self.cache:
            return self.cache[rel]
        v = Visit(rel=rel, url=urllib.parse.urljoin(self.base, rel))
        page = self.new_page()
        start = len(self.external)
        page.on("console", lambda m: v.console_errors.append(f"{m.text} ({m.location.get('url', '')})")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: v.page_errors.append(str(e)))
        page.on("requestfailed", lambda r: v.bad_local.append(f"{r.url}: {r.failure}")
                if self.is_local(r.url) else None)
        page.on("response", lambda r: v.bad_local.append(f"{r.url}: HTTP {r.status}")
                if r.status >= 400 and self.is_local(r.url) else None)
        try:
            resp = page.goto(v.url, wait_until="load")
            v.status = resp.status if resp else None
            try:
                page.wait_for_load_state("networkidle", timeout=15_000)
            except Exception:  # noqa: BLE001 - a page that keeps polling still gets checked
                pass
            page.evaluate("""async () => {
                if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
                if (document.fonts) await document.fonts.ready;
            }""")
            v.dom = page.evaluate(DOM_SCRIPT)
            SHOTS.mkdir(parents=True, exist_ok=True)
            v.screenshot = SHOTS / f"{page_id(rel)}.png"
            page.screenshot(path=str(v.screenshot), full_page=True)
        finally:
            v.external = self.external[start:]
            page.close()
        self.cache[rel] = v
        return v

    def close(self):
        try:
            self.context.close()
            self.browser.close()
        finally:
            self._pw.stop()


@pytest.fixture(scope="session")
def browser(site_url):
    b = Browser(site_url)
    try:
        yield b
    finally:
        b.close()


def fmt_list(items, limit=20) -> str:
    items = list(items)
    more = f"\n  ... and {len(items) - limit} more" if len(items) > limit else ""
    return "\n  " + "\n  ".join(str(i) for i in items[:limit]) + more
