"""The notebook-side front of a page: parameters, versions, figures, tables, flowcharts.

A page's third cell is::

    from trglab.page import Page
    page = Page("ising_trg", beta=beta, chi=chi, steps=steps)

``Page`` validates the parameters (one-line ``ValueError`` on bad input, raised in that
first code cell rather than deep in JAX), shows them as a table, and then collects the
page's key figures: ``page.record(name, value)`` writes the figure to the build's results
(``trglab.records``) and glues it (myst-nb) so the prose shows the number just computed.
"""

import math
import numbers
import os
import platform
import sys

from .html import format_cell, table_html

PARAM_DOC = {
    "beta": "逆温度 β",
    "chi": "截断维数 χ",
    "steps": "TRG 步数",
    "h": "中心差分步长",
    "steps_list": "要跑的 TRG 步数",
    "chi_list": "要比较的 χ",
    "layers_list": "最小链的层数",
    "model_steps": "模型跑的步数",
    "square_list": "标量反复平方的轮数",
    "nodes_list": "链表长度（节点数）",
    "cap_s": "单次运行的时间上限（秒）",
    "repeat": "稳态计时取最短的重复次数",
    "show_versions": "是否显示版本表",
    "beta_min": "扫描的最小 β",
    "beta_max": "扫描的最大 β",
    "points": "均匀网格的点数",
    "dense_points": "β_c 附近加密的点数",
    "dense_width": "加密区间的半宽",
    "conv_chi_list": "χ 收敛比较用的 χ",
}


class ParameterError(ValueError):
    """A page parameter is of the wrong type or out of range."""


def _is_int(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _is_real(x):
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(float(x))


def _check_int_list(name, value, minimum):
    if not isinstance(value, (list, tuple)) or not value:
        raise ParameterError(f"parameter {name} must be a non-empty list of ints, got {value!r}")
    for v in value:
        if not _is_int(v) or v < minimum:
            raise ParameterError(f"parameter {name} must hold ints >= {minimum}, got {v!r} in {list(value)!r}")


def validate_parameter(name, value):
    """Raise ParameterError (one line) when a parameter of a known kind is invalid.

    Kinds by name: ``beta*`` positive real; ``chi`` int >= 2; ``steps`` / ``layers`` /
    ``repeat`` int >= 1; ``*_list`` / ``ks`` non-empty list of ints (>= 2 for chi lists);
    ``*_s`` and ``h`` positive real. Other names pass.
    """
    if name.startswith("beta") and not name.endswith("_list"):
        if not _is_real(value) or value <= 0:
            raise ParameterError(f"parameter {name} must be a positive number, got {value!r}")
    elif name == "chi":
        if not _is_int(value) or value < 2:
            raise ParameterError(f"parameter chi must be an int >= 2, got {value!r}")
    elif name in ("steps", "layers", "repeat", "points"):
        if not _is_int(value) or value < 1:
            raise ParameterError(f"parameter {name} must be an int >= 1, got {value!r}")
    elif name.startswith("chi") and name.endswith("_list"):
        _check_int_list(name, value, 2)
    elif name.endswith("_list") and name.startswith("beta"):
        if not isinstance(value, (list, tuple)) or not value or not all(_is_real(v) and v > 0 for v in value):
            raise ParameterError(f"parameter {name} must be a non-empty list of positive numbers, got {value!r}")
    elif name.endswith("_list") or name == "ks":
        _check_int_list(name, value, 1)
    elif name.endswith("_s") or name == "h":
        if not _is_real(value) or value <= 0:
            raise ParameterError(f"parameter {name} must be a positive number, got {value!r}")


def versions():
    """What this kernel runs on: JAX, jaxlib, Python, numpy, CPU, OS (a dict)."""
    import jax
    import jaxlib
    import numpy

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "JAX": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "x64": bool(jax.config.jax_enable_x64),
        "backend": jax.default_backend(),
        "Python": sys.version.split()[0],
        "numpy": numpy.__version__,
        "CPU": f"{cpu} ({os.cpu_count()} cores)",
        "OS": platform.platform(),
    }


class _Figure:
    """A glued figure whose page text is exactly the formatted value.

    myst-nb's ``{glue:text}`` runs ``ast.literal_eval`` on the text/plain output, so the
    repr is a quoted string literal: lists stay "2, 4, 4" and trailing zeros survive.
    """

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return repr(self.text)


class Page:
    """One page of the book: validated parameters and the figures it records."""

    def __init__(self, page_id, show=True, **params):
        if not page_id or not isinstance(page_id, str):
            raise ParameterError(f"page id must be a non-empty string, got {page_id!r}")
        for name, value in params.items():
            validate_parameter(name, value)
        steps, ks = params.get("steps"), params.get("ks")
        if ks is not None and steps is not None and len(ks) != steps:
            raise ParameterError(f"schedule ks has {len(ks)} entries but steps = {steps}")
        self.page_id = page_id
        self.params = dict(params)
        self.figures = {}
        from .plotting import setup_fonts

        setup_fonts()  # every plot on a page gets a CJK font for its Chinese labels
        if show:
            self.show_parameters()

    # --- parameters and versions ---------------------------------------------------
    def require(self, condition, message):
        """Extra validation by the page: raise ParameterError(message) unless condition."""
        if not condition:
            raise ParameterError(message)

    def parameter_rows(self):
        def doc(k):
            if k in PARAM_DOC:
                return PARAM_DOC[k]
            if k.endswith("_s"):
                return "时间上限（秒）"
            return ""

        return [{"参数": k, "含义": doc(k), "值": format_cell(v)} for k, v in self.params.items()]

    def show_parameters(self):
        self._display_html(table_html(self.parameter_rows(), ["参数", "含义", "值"], caption="本页运行参数"))

    def versions(self, show=True):
        v = versions()
        if show:
            rows = [{"项目": k, "版本": format_cell(val)} for k, val in v.items()]
            self._display_html(table_html(rows, ["项目", "版本"], caption="本页 JAX 一侧实际运行的环境（本次构建）"))
        return v

    # --- figures ------------------------------------------------------------------
    def record(self, name, value, fmt=None, glue=True):
        """Store a key figure in the build's results and glue it for the prose.

        value: float, int, str, bool or a list of those. ``fmt`` formats floats for the
        glued text (the stored value keeps full precision). Returns value.
        """
        from . import records

        value = _plain(value)
        records.write_figure(self.page_id, name, value)
        self.figures[name] = value
        if glue:
            from myst_nb import glue as mystnb_glue

            mystnb_glue(name, _Figure(format_cell(value, fmt)), display=False)
        return _Quiet(value)

    def glue(self, name, value, fmt=None):
        """Glue a value for the prose without making it a key figure of the page."""
        from myst_nb import glue as mystnb_glue

        mystnb_glue(name, _Figure(format_cell(_plain(value), fmt)), display=False)
        return _Quiet(value)

    # --- display helpers ------------------------------------------------------------
    def table(self, rows, columns=None, caption=None, fmt=None):
        self._display_html(table_html(rows, columns, caption=caption, fmt=fmt))

    def recorded(self, name, fmt=None, show=True):
        from . import recorded

        rec = recorded.load(name)
        if show:
            self._display_html(rec.html(fmt=fmt))
        return rec

    def flowchart(self, src, name):
        from . import flowchart

        svg = flowchart.render_svg(src, name)
        self._display_html(f'<div class="trglab-flowchart" id="flowchart-{name}">{svg}</div>')
        return _Quiet(svg)

    @staticmethod
    def _display_html(text):
        from IPython.display import HTML, display

        display(HTML(text))


class _Quiet:
    """A returned value that prints nothing when it is the last line of a cell.

    ``.value`` is the value; numbers and lists are proxied for arithmetic use.
    """

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return ""

    def _repr_html_(self):
        return ""

    def _ipython_display_(self):
        pass

    def __getattr__(self, name):
        return getattr(self.value, name)

    def __float__(self):
        return float(self.value)

    def __int__(self):
        return int(self.value)

    def __iter__(self):
        return iter(self.value)

    def __len__(self):
        return len(self.value)

    def __getitem__(self, i):
        return self.value[i]

    def __eq__(self, other):
        return self.value == (other.value if isinstance(other, _Quiet) else other)

    def __hash__(self):
        return hash(self.value)


def _plain(value):
    """Convert numpy/JAX scalars and arrays to JSON-ready Python values."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if _is_int(value):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(f"cannot record a figure of type {type(value).__name__}")
