"""Matplotlib for the book: a CJK font for Chinese labels, and the plots pages need.

``setup_fonts()`` finds a font with CJK glyphs (Noto Sans CJK from Debian's
``fonts-noto-cjk`` first) and puts it first in matplotlib's sans-serif list, so Chinese
axis labels and legends do not come out as empty boxes. Without such a font it warns
once, clearly, and keeps matplotlib's default.

``log_lines(series, ...)`` draws labelled series on a log-scale y axis (timings per
step, errors per step): ``series`` is ``{label: (xs, ys)}``.
"""

from __future__ import annotations

import warnings

CJK_FAMILIES = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans CJK TC", "Noto Serif CJK SC",
                "Source Han Sans SC", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "SimHei", "Microsoft YaHei")

_FONT = None


class CJKFontWarning(UserWarning):
    """No font with CJK glyphs: Chinese labels will show as boxes."""


def find_cjk_font() -> str | None:
    """Family name of an installed font with CJK glyphs, or None."""
    from matplotlib import font_manager

    names = {f.name for f in font_manager.fontManager.ttflist}
    for family in CJK_FAMILIES:
        if family in names:
            return family
    for f in font_manager.fontManager.ttflist:  # any other font named CJK
        if "CJK" in f.name:
            return f.name
    return None


def setup_fonts() -> str | None:
    """Make matplotlib use a CJK font; returns its family name (None + warning if missing)."""
    global _FONT
    import matplotlib

    if _FONT is None:
        _FONT = find_cjk_font() or ""
        if not _FONT:
            warnings.warn("no CJK font found for matplotlib: Chinese labels will show as empty boxes "
                          "(install Debian fonts-noto-cjk: apt-get install fonts-noto-cjk)", CJKFontWarning,
                          stacklevel=2)
    if _FONT:
        sans = [f for f in matplotlib.rcParams["font.sans-serif"] if f != _FONT]
        matplotlib.rcParams["font.sans-serif"] = [_FONT, *sans]
        matplotlib.rcParams["font.family"] = "sans-serif"
        matplotlib.rcParams["axes.unicode_minus"] = False  # the CJK font lacks U+2212
    return _FONT or None


def new_figure(width: float = 6.4, height: float = 4.0):
    """(fig, ax) with the CJK font set up."""
    import matplotlib.pyplot as plt

    setup_fonts()
    fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    return fig, ax


def log_lines(series: dict, xlabel: str = "", ylabel: str = "", title: str = "", logx: bool = False,
              markers: bool = True, ax=None):
    """Labelled line plot with a log-scale y axis; returns the figure.

    series: ``{label: (xs, ys)}`` (equal lengths; non-positive y values are not drawn on
    the log scale, so pass NaN for missing points). Raises ValueError on mismatched lengths.
    """
    if not series:
        raise ValueError("log_lines needs at least one series")
    for label, (xs, ys) in series.items():
        if len(xs) != len(ys):
            raise ValueError(f"series {label!r}: {len(xs)} x values but {len(ys)} y values")
    if ax is None:
        fig, ax = new_figure()
    else:
        setup_fonts()
        fig = ax.figure
    for i, (label, (xs, ys)) in enumerate(series.items()):
        ax.plot(xs, ys, marker="os^vD<>"[i % 7] if markers else None, label=label)
    ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return fig
