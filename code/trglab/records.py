"""A page's key figures, written where the build (or pytest) collects them.

Each page writes ``$TRGLAB_RESULTS_DIR/<page_id>.json``::

    {"page": "<page_id>", "figures": {"<name>": <value>, ...}}

(default folder ``_build/results-local/`` under the repository root when the variable
is unset; never ``data/``). Values are JSON values: float, int, str, bool, None or
(nested) lists of those. Writes are atomic (temporary file + ``os.replace``) and merge
with the figures the same page already wrote into that folder, so a page may record
its figures one by one and a reader never sees a half-written file.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import tempfile
from pathlib import Path

from .paths import repo_root

ENV_VAR = "TRGLAB_RESULTS_DIR"
_PAGE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,120}$")


class RecordError(ValueError):
    """A figure that cannot be recorded (bad page id, name or value): one-line message."""


def results_dir() -> Path:
    """The folder figures go to: env TRGLAB_RESULTS_DIR, else _build/results-local/."""
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else repo_root() / "_build" / "results-local"


def check_value(value, where="value"):
    """Raise RecordError unless ``value`` is a finite-or-not JSON value (lists nest).

    NaN and inf are allowed (a page may record that a gradient is NaN); they are stored
    as the JSON extensions ``NaN``/``Infinity`` that Python's json reads back.
    """
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_value(v, f"{where}[{i}]")
        return
    raise RecordError(
        f"{where} must be float, int, str, bool, None or a list of those, got {type(value).__name__} "
        f"(convert numpy/JAX values with float(), int() or .tolist())")


def _check_ids(page_id, name):
    if not isinstance(page_id, str) or not _PAGE_RE.match(page_id):
        raise RecordError(f"page id must be letters, digits, '_', '.', '-', got {page_id!r}")
    if not isinstance(name, str) or not name.strip():
        raise RecordError(f"figure name must be a non-empty string, got {name!r}")


def _plain(value):
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def write_figure(page_id: str, name: str, value, directory: str | os.PathLike | None = None) -> Path:
    """Record figure ``name`` = ``value`` of page ``page_id``; returns the file written.

    Merges with ``<dir>/<page_id>.json`` if present (same page, same run); the last
    value written for a name wins. Raises RecordError for a non-JSON value.
    """
    _check_ids(page_id, name)
    check_value(value, f"figure {name!r}")
    folder = Path(directory) if directory is not None else results_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{page_id}.json"
    with open(folder / f".{page_id}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # read-merge-write of one page's file, one writer at a time
        try:
            _merge_write(path, page_id, name, value, folder)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return path


def _merge_write(path, page_id, name, value, folder):
    doc = {"page": page_id, "figures": {}}
    if path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(old, dict) and isinstance(old.get("figures"), dict):
                doc["figures"].update(old["figures"])
        except (OSError, ValueError):
            pass  # a broken file from an older run is replaced
    doc["figures"][name] = _plain(value)
    fd, tmp = tempfile.mkstemp(prefix=f".{page_id}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, ensure_ascii=False, allow_nan=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_results(directory: str | os.PathLike | None = None) -> dict[str, dict]:
    """All figures in a results folder: ``{page_id: {name: value}}`` (empty if absent)."""
    folder = Path(directory) if directory is not None else results_dir()
    out: dict[str, dict] = {}
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise RecordError(f"{path}: not valid JSON ({exc})") from None
        page = doc.get("page", path.stem) if isinstance(doc, dict) else path.stem
        figures = doc.get("figures", {}) if isinstance(doc, dict) else {}
        out.setdefault(page, {}).update(figures)
    return out


def is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def finite(x) -> bool:
    return is_number(x) and math.isfinite(x)
