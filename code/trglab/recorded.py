"""Recorded tenferro-rs figures: ``data/tenferro/<name>.csv`` + ``<name>.meta.json``.

tenferro-rs cannot be built on our machines, so its side of every experiment is data
recorded elsewhere. A ``Recorded`` always carries its provenance and says it was not
re-run.
"""

import csv
import json
from dataclasses import dataclass, field

from .html import table_html
from .paths import data_dir

PROVENANCE_KEYS = ("tenferro_version", "machine", "os", "build", "rustc", "source")


def _parse(text):
    text = text.strip()
    if text == "":
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


@dataclass
class Recorded:
    """Rows of a recorded table (numbers parsed) and its provenance ``meta``."""

    name: str
    rows: list
    meta: dict = field(default_factory=dict)

    @property
    def columns(self):
        return list(self.rows[0].keys()) if self.rows else []

    def column(self, key):
        """All values of one column, in row order."""
        return [r[key] for r in self.rows]

    def where(self, **conds):
        """Rows whose columns equal the given values."""
        return [r for r in self.rows if all(r.get(k) == v for k, v in conds.items())]

    def provenance(self):
        """One line: version, machine, OS, build, compiler, source."""
        m = self.meta
        parts = [
            f"tenferro-rs {m.get('tenferro_version', '?')}",
            m.get("machine", "?"),
            m.get("os", "?"),
            m.get("build", "?"),
            f"rustc {m.get('rustc', '?')}",
        ]
        return " · ".join(parts) + f" · 来源：{m.get('source', '?')}"

    def html(self, fmt=None):
        title = self.meta.get("title", self.name)
        caption = f"记录数据（非本次运行）：{title}"
        note = f'<p class="trglab-provenance"><em>{self.provenance()}</em></p>'
        return table_html(self.rows, self.columns, caption=caption, fmt=fmt, css_class="trglab-table trglab-recorded") + note

    def _repr_html_(self):
        return self.html()


def load(name):
    """Load ``data/tenferro/<name>.csv`` and its ``.meta.json``; clear error if absent."""
    base = data_dir() / "tenferro"
    path = base / f"{name}.csv"
    meta_path = base / f"{name}.meta.json"
    if not path.exists():
        raise FileNotFoundError(f"no recorded data {path}")
    if not meta_path.exists():
        raise FileNotFoundError(f"recorded data {path} has no provenance file {meta_path.name}")
    with open(path, newline="", encoding="utf-8") as f:
        lines = [ln for ln in f if not ln.startswith("#")]
    rows = [{k: _parse(v) for k, v in row.items()} for row in csv.DictReader(lines)]
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    missing = [k for k in PROVENANCE_KEYS if k not in meta]
    if missing:
        raise ValueError(f"{meta_path.name} lacks provenance keys: {', '.join(missing)}")
    return Recorded(name, rows, meta)
