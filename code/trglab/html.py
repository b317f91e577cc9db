"""Small HTML renderers for tables on pages (no pandas needed)."""

import html
import math


def format_cell(value, fmt=None):
    """Text for one table cell: floats with ``fmt`` (default: repr-like), lists joined."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "是" if value else "否"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        return format(value, fmt) if fmt else repr(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(format_cell(v, fmt) for v in value) if value else "无"
    return str(value)


def table_html(rows, columns=None, caption=None, fmt=None, css_class="trglab-table"):
    """rows: list of dicts (columns default to the first row's keys) or list of lists.

    ``fmt`` is a format spec for floats, or a dict column -> format spec.
    """
    rows = list(rows)
    if columns is None:
        if rows and isinstance(rows[0], dict):
            columns = list(rows[0].keys())
        else:
            raise ValueError("table_html needs columns for rows that are not dicts")
    out = [f'<table class="{css_class}">']
    if caption:
        out.append(f"<caption>{html.escape(str(caption))}</caption>")
    out.append("<thead><tr>" + "".join(f"<th>{html.escape(str(c))}</th>" for c in columns) + "</tr></thead>")
    out.append("<tbody>")
    if not rows:
        out.append(f'<tr><td colspan="{len(columns)}">无</td></tr>')
    for row in rows:
        values = [row.get(c) for c in columns] if isinstance(row, dict) else list(row)
        cells = []
        for c, v in zip(columns, values):
            f = fmt.get(c) if isinstance(fmt, dict) else fmt
            cells.append(f"<td>{html.escape(format_cell(v, f))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)
