"""Flowcharts as real SVG in notebook outputs, rendered by mermaid-py.

mermaid-py's ``Mermaid(source)`` asks a mermaid.ink server (env
``MERMAID_INK_SERVER``) for ``/svg/<base64>`` and ``/img/<base64>?format=png``.
Offline, that server is the project's own service on 127.0.0.1 (see
``trglab.flowchart_service``); when ``MERMAID_INK_SERVER`` is unset we point
mermaid-py at ``http://127.0.0.1:$TRGLAB_MERMAID_PORT`` (default 3377). A user
with internet may export ``MERMAID_INK_SERVER=https://mermaid.ink`` instead.

There is no fallback to showing the mermaid source: if the service cannot be
reached or the diagram does not parse, ``FlowchartError`` says so in one line.

Usage in a notebook::

    from trglab.flowchart import show
    show('flowchart LR\\n  A["输入 T"] --> B["SVD 分解"]', "trg_step")
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import os
import re
from html.parser import HTMLParser

import requests

from .flowchart_service import default_port, url_for

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_SVG_ID_RE = re.compile(r'<svg\b[^>]*?\bid="([^"]+)"')


class FlowchartError(RuntimeError):
    """A flowchart could not be rendered (service unreachable, bad diagram); one-line message."""


def server_url() -> str:
    """The mermaid.ink server in use: env MERMAID_INK_SERVER, else the local service's URL."""
    return os.environ.get("MERMAID_INK_SERVER") or url_for(default_port())


@contextlib.contextmanager
def _server_env(url: str):
    # mermaid-py reads MERMAID_INK_SERVER at request time and only from the environment.
    old = os.environ.get("MERMAID_INK_SERVER")
    os.environ["MERMAID_INK_SERVER"] = url
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MERMAID_INK_SERVER", None)
        else:
            os.environ["MERMAID_INK_SERVER"] = old


def svg_id(name: str) -> str:
    """The id the SVG of flowchart ``name`` carries in the page (``trglab-fc-<name>``)."""
    return f"trglab-fc-{name}"


def _check(src, name) -> None:
    if not isinstance(src, str) or not src.strip():
        raise ValueError("flowchart source must be a non-empty string of mermaid text")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(f"flowchart name must match [A-Za-z0-9][A-Za-z0-9_-]*, got {name!r}")


def render_svg(src: str, name: str) -> str:
    """Render mermaid text ``src`` to SVG text through mermaid-py's ``Mermaid`` class.

    ``name`` (letters, digits, ``_``, ``-``) names the diagram: the SVG's id and every
    id-scoped CSS rule and marker inside it are renamed to ``trglab-fc-<name>``, so that
    several flowcharts on one page do not share ids. Labels are plain SVG ``<text>``.

    Raises ValueError on a bad ``src``/``name`` and FlowchartError (one line) when the
    server is unreachable, rejects the diagram, or answers with something not SVG.
    """
    _check(src, name)
    from mermaid import Mermaid, MermaidError

    url = server_url()
    try:
        with _server_env(url):
            diagram = Mermaid(src)
    except requests.exceptions.ConnectionError:
        raise FlowchartError(
            f"flowchart service not reachable at {url}: start it with "
            f"`python -m trglab.flowchart_service start` (make book does this) and "
            f"export MERMAID_INK_SERVER={url}") from None
    except requests.exceptions.RequestException as exc:
        raise FlowchartError(f"request to flowchart service {url} failed: {type(exc).__name__}") from None
    except MermaidError as exc:
        detail = " ".join((exc.response_text or "").split())[:300]
        raise FlowchartError(f"flowchart {name!r} not rendered by {url} "
                             f"(HTTP {exc.status_code}): {detail}") from None
    svg = diagram.svg_response.text
    found = _SVG_ID_RE.search(svg)
    if not svg.lstrip().startswith(("<svg", "<?xml")) or not found:
        raise FlowchartError(f"flowchart {name!r}: {url} did not answer with an SVG "
                             f"(got {svg[:60]!r})")
    return svg.replace(found.group(1), svg_id(name))


class _TextCollector(HTMLParser):
    """Collect the text of each SVG ``<text>`` element (tspans joined)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.parts: list[str] = []
        self.labels: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "text":
            self.depth += 1
            if self.depth == 1:
                self.parts = []

    def handle_endtag(self, tag):
        if tag == "text" and self.depth:
            self.depth -= 1
            if self.depth == 0:
                label = " ".join("".join(self.parts).split())
                if label:
                    self.labels.append(label)

    def handle_data(self, data):
        if self.depth:
            self.parts.append(data)


def labels(svg: str) -> list[str]:
    """Text of the SVG's ``<text>`` nodes in document order (whitespace collapsed, empty ones dropped)."""
    parser = _TextCollector()
    parser.feed(svg)
    parser.close()
    return parser.labels


class Flowchart:
    """A rendered flowchart; Jupyter shows it as inline SVG (``text/html``), so it lands in the site.

    Attributes: ``name``, ``source`` (mermaid text), ``svg`` (SVG text), ``labels`` (list of str).
    """

    def __init__(self, src: str, name: str):
        self.name = name
        self.source = src
        self.svg = render_svg(src, name)
        self.labels = labels(self.svg)
        self.digest = hashlib.sha1(src.encode("utf-8")).hexdigest()[:12]

    def _repr_html_(self) -> str:
        return (f'<div class="trglab-flowchart" id="flowchart-{html.escape(self.name)}" '
                f'data-source-sha1="{self.digest}">{self.svg}</div>')

    def __repr__(self) -> str:
        return f"Flowchart({self.name!r}, labels={self.labels!r})"


def show(src: str, name: str) -> Flowchart:
    """Render ``src`` and return the Flowchart display object.

    Make it the last expression of a cell (or pass it to ``IPython.display.display``)
    so that the SVG lands in the cell's output; it is not displayed twice.
    """
    return Flowchart(src, name)
