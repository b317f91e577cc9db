"""The numbers check: fresh figures of this build against ``data/expected/``.

``data/expected/<page>.json``::

    {"page": "<page>", "source_default": "...",            # source_default optional
     "figures": {"<name>": {"kind": ..., "value": ..., ..., "source": "..."}}}

Kinds (``value`` is what was recorded; ``fresh`` what this build computed):

- ``exact``: ``fresh == value`` (counts, strings, schedules; lists compare element-wise).
- ``float``: ``|fresh - value| <= atol + rtol * |value|``, element-wise for lists of the
  same length; NaN matches only NaN. Keys ``rtol`` and ``atol`` (default 0).
- ``shape``: a rule on the fresh value (a number or a list of numbers), ``value`` is the
  rule's threshold:
  ``all_below`` / ``all_above`` (every entry < / > value), ``max_ratio_below`` (every
  successive ratio x[i+1]/x[i] < value), ``min_ratio_above`` (every ratio > value),
  ``monotone_increasing`` / ``monotone_decreasing`` (strict, no threshold),
  ``between`` (value = [lo, hi], every entry within).
- ``unstable``: figures that differ between runs or machines by design, checked by a
  rule: ``equal_then_differ`` (fresh is a pair of lists [a, b], or ``"other": "<figure>"``
  names the second list; ``|a_i - b_i| <= atol`` for i < ``split``, ``> differ_above``
  from ``split`` on; NaN counts as differing), ``nonfinite_from`` (finite before index
  ``split``, NaN/inf from it on), ``any_of`` (fresh is one of ``values``). ``value`` is
  optional and only shown. Any other ``rule`` is a sentence: the figure must be produced,
  but its value is only shown (verdict "not compared"), e.g. a platform-dependent
  gradient whose property is checked through another figure of the page.

``python -m trglab check [--results DIR] [--expected DIR] [--partial] [--accept]``
prints a table (page, figure, recorded, fresh, tolerance, verdict, source), writes a
machine-readable report (``_build/check.json``), and exits 1 on any miss and, unless
``--partial``, on any recorded figure that no page produced. ``--accept`` rewrites
the recorded values of ``exact`` and ``float`` figures from the fresh results and
prints each change; it is the only code that writes ``data/``.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from .paths import repo_root
from .records import RecordError, is_number, read_results

KINDS = ("exact", "float", "shape", "unstable")
SHAPE_RULES = ("all_below", "all_above", "max_ratio_below", "min_ratio_above",
               "monotone_increasing", "monotone_decreasing", "between")
UNSTABLE_RULES = ("equal_then_differ", "nonfinite_from", "any_of")

OK, MISS, NOT_PRODUCED, NOT_RUN, NOT_COMPARED = "ok", "MISS", "MISSING", "not run", "not compared"


class ExpectedError(ValueError):
    """A malformed file in data/expected (one-line message)."""


@dataclass
class Row:
    page: str
    figure: str
    recorded: str
    fresh: str
    tolerance: str
    verdict: str
    source: str
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.verdict in (MISS, NOT_PRODUCED)


# --- reading ------------------------------------------------------------------------
def expected_dir() -> Path:
    return repo_root() / "data" / "expected"


def load_expected(directory=None) -> dict[str, dict]:
    """``{page: {"source_default": str, "figures": {name: spec}, "path": Path}}``, validated."""
    folder = Path(directory) if directory is not None else expected_dir()
    if not folder.is_dir():
        raise ExpectedError(f"no folder of expected figures at {folder}")
    out = {}
    for path in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ExpectedError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("figures"), dict):
            raise ExpectedError(f"{path}: expected an object with a 'figures' object")
        page = doc.get("page") or path.stem
        for name, spec in doc["figures"].items():
            validate_spec(spec, f"{path.name}: figure {name!r}")
        out[page] = {"source_default": doc.get("source_default", ""), "figures": doc["figures"], "path": path}
    return out


def validate_spec(spec, where="figure"):
    if not isinstance(spec, dict):
        raise ExpectedError(f"{where}: expected an object, got {type(spec).__name__}")
    kind = spec.get("kind")
    if kind not in KINDS:
        raise ExpectedError(f"{where}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if kind in ("exact", "float") and "value" not in spec:
        raise ExpectedError(f"{where}: kind {kind} needs a 'value'")
    if kind == "float":
        for key in ("rtol", "atol"):
            tol = spec.get(key, 0)
            if not is_number(tol) or tol < 0:
                raise ExpectedError(f"{where}: {key} must be a number >= 0, got {tol!r}")
    if kind == "shape":
        rule = _shape_rule(spec)
        if rule not in SHAPE_RULES:
            raise ExpectedError(f"{where}: shape rule must be one of {', '.join(SHAPE_RULES)}, got {rule!r}")
        if not rule.startswith("monotone") and _shape_threshold(spec) is None:
            raise ExpectedError(f"{where}: shape rule {rule} needs a threshold 'value'")
    if kind == "unstable":
        rule = spec.get("rule")
        if not isinstance(rule, str) or not rule.strip():
            raise ExpectedError(f"{where}: unstable needs a 'rule' (one of {', '.join(UNSTABLE_RULES)}, "
                                f"or a sentence saying where the property is checked)")
        if rule in ("equal_then_differ", "nonfinite_from") and not (
                isinstance(spec.get("split"), int) and spec["split"] >= 0):
            raise ExpectedError(f"{where}: rule {rule} needs an int 'split' >= 0")
        if rule == "any_of" and not isinstance(spec.get("values"), list):
            raise ExpectedError(f"{where}: rule any_of needs a list 'values'")


def _shape_rule(spec):
    rule = spec.get("rule")
    # accepted spelling: {"rule": "max_ratio", "below": 1.5}
    if rule in ("max_ratio", "min_ratio", "all") and ("below" in spec or "above" in spec):
        rule = f"{rule}_{'below' if 'below' in spec else 'above'}"
    return rule


def _shape_threshold(spec):
    for key in ("value", "below", "above"):
        if key in spec:
            return spec[key]
    return None


# --- comparing ------------------------------------------------------------------------
def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _isnan(x):
    return isinstance(x, float) and math.isnan(x)


def _float_close(fresh, value, rtol, atol):
    if isinstance(value, list) or isinstance(fresh, list):
        if not (isinstance(value, list) and isinstance(fresh, list)) or len(value) != len(fresh):
            return False, "length/type differs"
        for i, (f, v) in enumerate(zip(fresh, value)):
            ok, why = _float_close(f, v, rtol, atol)
            if not ok:
                return False, f"entry {i}: {why}"
        return True, ""
    if not is_number(fresh) or not is_number(value):
        return False, f"not a number: {fresh!r}"
    if _isnan(value) or _isnan(fresh):
        return (_isnan(value) and _isnan(fresh)), "NaN"
    if math.isinf(value) or math.isinf(fresh):
        return value == fresh, "inf"
    diff = abs(fresh - value)
    bound = atol + rtol * abs(value)
    return diff <= bound, f"|diff| = {diff:.3g} > {bound:.3g}" if diff > bound else f"|diff| = {diff:.3g}"


def _shape_ok(spec, fresh):
    rule, thr = _shape_rule(spec), _shape_threshold(spec)
    xs = _as_list(fresh)
    if not xs or not all(is_number(x) for x in xs):
        return False, f"needs numbers, got {fresh!r}"
    if rule == "all_below":
        bad = [x for x in xs if not x < thr]
        return not bad, f"{bad[0]!r} not < {thr}" if bad else ""
    if rule == "all_above":
        bad = [x for x in xs if not x > thr]
        return not bad, f"{bad[0]!r} not > {thr}" if bad else ""
    if rule == "between":
        lo, hi = thr
        bad = [x for x in xs if not lo <= x <= hi]
        return not bad, f"{bad[0]!r} not in [{lo}, {hi}]" if bad else ""
    if len(xs) < 2:
        return False, f"rule {rule} needs at least 2 entries"
    pairs = list(zip(xs, xs[1:]))
    if rule in ("max_ratio_below", "min_ratio_above"):
        if any(a == 0 for a, _ in pairs):
            return False, "ratio with a zero denominator"
        ratios = [b / a for a, b in pairs]
        if rule == "max_ratio_below":
            return max(ratios) < thr, f"max ratio {max(ratios):.4g}"
        return min(ratios) > thr, f"min ratio {min(ratios):.4g}"
    if rule == "monotone_increasing":
        return all(b > a for a, b in pairs), ""
    if rule == "monotone_decreasing":
        return all(b < a for a, b in pairs), ""
    return False, f"unknown rule {rule}"


def _unstable_ok(spec, fresh, page_fresh):
    rule = spec["rule"]
    if rule not in UNSTABLE_RULES:
        return None, rule
    if rule == "any_of":
        return fresh in spec["values"], ""
    if rule == "nonfinite_from":
        xs, m = _as_list(fresh), spec["split"]
        if not all(is_number(x) for x in xs):
            return False, "needs numbers"
        head_ok = all(math.isfinite(x) for x in xs[:m])
        tail_ok = all(not math.isfinite(x) for x in xs[m:])
        return head_ok and tail_ok and len(xs) > m, f"finite up to {m}: {head_ok}, non-finite after: {tail_ok}"
    # equal_then_differ
    if "other" in spec:
        other = page_fresh.get(spec["other"])
        if other is None:
            return False, f"figure {spec['other']!r} not produced"
        a, b = _as_list(fresh), _as_list(other)
    else:
        if not (isinstance(fresh, list) and len(fresh) == 2):
            return False, "needs a pair of lists [a, b]"
        a, b = _as_list(fresh[0]), _as_list(fresh[1])
    m, atol, d = spec["split"], spec.get("atol", 0.0), spec.get("differ_above", 0.0)
    if len(a) != len(b) or len(a) <= m:
        return False, f"lists of length {len(a)}, {len(b)} for split {m}"

    def gap(x, y):
        return math.inf if (_isnan(x) or _isnan(y)) else abs(x - y)

    same = [gap(x, y) for x, y in zip(a[:m], b[:m])]
    diff = [gap(x, y) for x, y in zip(a[m:], b[m:])]
    ok = all(g <= atol for g in same) and all(g > d for g in diff)
    return ok, f"max gap before {m}: {max(same, default=0):.3g}, min gap from {m}: {min(diff):.3g}"


def tolerance_text(spec) -> str:
    kind = spec["kind"]
    if kind == "exact":
        return "exact"
    if kind == "float":
        parts = []
        if spec.get("rtol"):
            parts.append(f"rtol {spec['rtol']:g}")
        if spec.get("atol") or not parts:
            parts.append(f"atol {spec.get('atol', 0):g}")
        return ", ".join(parts)
    if kind == "shape":
        rule, thr = _shape_rule(spec), _shape_threshold(spec)
        return rule if thr is None else f"{rule} {fmt_value(thr)}"
    rule = spec["rule"]
    if rule == "equal_then_differ":
        return (f"equal (atol {spec.get('atol', 0):g}) before {spec['split']}, "
                f"differ > {spec.get('differ_above', 0):g} from it")
    if rule == "nonfinite_from":
        return f"finite before {spec['split']}, NaN/inf from it"
    if rule == "any_of":
        return f"one of {fmt_value(spec['values'])}"
    return rule


def fmt_value(x, width=48) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        text = repr(x)
    elif isinstance(x, (list, tuple)):
        text = "[" + ", ".join(fmt_value(v, 10**6) for v in x) + "]"
    else:
        text = str(x)
    return text if len(text) <= width else text[: width - 1] + "…"


def compare(spec, fresh, page_fresh=None) -> tuple[bool | None, str]:
    """(ok, detail) for one figure; ok is None for an unstable figure with a sentence rule."""
    kind = spec["kind"]
    if kind == "exact":
        ok = fresh == spec["value"]
        return ok, "" if ok else "not equal"
    if kind == "float":
        return _float_close(fresh, spec["value"], spec.get("rtol", 0.0), spec.get("atol", 0.0))
    if kind == "shape":
        return _shape_ok(spec, fresh)
    return _unstable_ok(spec, fresh, page_fresh or {})


def check(results: dict, expected: dict, partial: bool = False) -> list[Row]:
    """One Row per expected figure (plus unlisted fresh figures, verdict 'unlisted')."""
    rows = []
    for page in sorted(expected):
        entry = expected[page]
        page_fresh = results.get(page)
        for name, spec in entry["figures"].items():
            source = spec.get("source") or entry["source_default"]
            recorded = fmt_value(spec.get("value")) if spec["kind"] in ("exact", "float") else (
                fmt_value(spec["value"]) if spec["kind"] == "unstable" and "value" in spec else "(rule)")
            tol = tolerance_text(spec)
            if page_fresh is None or name not in page_fresh:
                verdict = NOT_RUN if partial else NOT_PRODUCED
                why = "page not run" if page_fresh is None else "figure not produced by the page"
                rows.append(Row(page, name, recorded, "—", tol, verdict, source, why))
                continue
            fresh = page_fresh[name]
            ok, detail = compare(spec, fresh, page_fresh)
            verdict = NOT_COMPARED if ok is None else (OK if ok else MISS)
            rows.append(Row(page, name, recorded, fmt_value(fresh), tol, verdict, source, detail))
        for name in sorted(set(page_fresh or {}) - set(entry["figures"])):
            rows.append(Row(page, name, "—", fmt_value(page_fresh[name]), "—", "unlisted", "",
                            "recorded by the page, not in data/expected"))
    for page in sorted(set(results) - set(expected)):
        for name in sorted(results[page]):
            rows.append(Row(page, name, "—", fmt_value(results[page][name]), "—", "unlisted", "",
                            "page has no data/expected file"))
    return rows


# --- output -----------------------------------------------------------------------------
COLUMNS = ("page", "figure", "recorded", "fresh", "tolerance", "verdict", "source")


def _cut(text, width):
    return text if len(text) <= width else text[: width - 1] + "…"


def format_table(rows, source_width=40) -> str:
    data = [list(COLUMNS)]
    for r in rows:
        data.append([r.page, r.figure, r.recorded, r.fresh, _cut(r.tolerance, 48), r.verdict, _cut(r.source, source_width)])
    widths = [max(len(line[i]) for line in data) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in data]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def summary(rows) -> dict:
    counts = {}
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    return counts


def write_report(rows, path, partial, results_dir) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"partial": partial, "results": str(results_dir), "summary": summary(rows),
           "failed": any(r.failed for r in rows), "rows": [asdict(r) for r in rows]}
    _atomic_write(path, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- accepting new values ----------------------------------------------------------------
def dump_expected(doc: dict) -> str:
    """JSON text of an expected file: top-level keys on their own lines, one line per figure."""
    lines = ["{"]
    keys = [k for k in doc if k != "figures"]
    for k in keys:
        lines.append(f"  {json.dumps(k)}: {json.dumps(doc[k], ensure_ascii=False)},")
    lines.append('  "figures": {')
    items = list(doc["figures"].items())
    for i, (name, spec) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f"    {json.dumps(name, ensure_ascii=False)}: {json.dumps(spec, ensure_ascii=False)}{comma}")
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def accept(results: dict, expected: dict, out=None) -> list[tuple[str, str, object, object]]:
    """Rewrite recorded values of exact/float figures from fresh results; returns changes."""
    out = out or sys.stdout
    changes = []
    for page, entry in sorted(expected.items()):
        fresh = results.get(page, {})
        path = entry["path"]
        doc = json.loads(path.read_text(encoding="utf-8"))
        changed = False
        for name, spec in doc["figures"].items():
            if spec.get("kind") not in ("exact", "float") or name not in fresh:
                continue
            if fresh[name] != spec["value"]:
                changes.append((page, name, spec["value"], fresh[name]))
                print(f"{page}.{name}: {fmt_value(spec['value'], 10**6)} -> {fmt_value(fresh[name], 10**6)}", file=out)
                spec["value"] = fresh[name]
                changed = True
        if changed:
            _atomic_write(path, dump_expected(doc))
    if not changes:
        print("no recorded value changes", file=out)
    return changes


# --- command line -------------------------------------------------------------------------
def add_arguments(parser):
    root = repo_root()
    parser.add_argument("--results", default=str(root / "_build" / "results"),
                        help="folder of fresh results (default _build/results)")
    parser.add_argument("--expected", default=str(root / "data" / "expected"),
                        help="folder of expected figures (default data/expected)")
    parser.add_argument("--report", default=str(root / "_build" / "check.json"),
                        help="machine-readable report to write (default _build/check.json)")
    parser.add_argument("--partial", action="store_true",
                        help="only check figures that were produced (pytest, one page)")
    parser.add_argument("--accept", action="store_true",
                        help="rewrite recorded exact/float values in data/expected from the fresh results")


def run(args, out=None) -> int:
    out = out or sys.stdout
    try:
        results = read_results(args.results)
        expected = load_expected(args.expected)
    except (ExpectedError, RecordError) as exc:
        print(f"check: {exc}", file=sys.stderr)
        return 2
    if not results and not args.partial:
        print(f"check: no results in {args.results} (run `make book` first)", file=sys.stderr)
        return 2
    if args.accept:
        accept(results, expected, out=out)
        expected = load_expected(args.expected)
    rows = check(results, expected, partial=args.partial)
    shown = [r for r in rows if r.verdict != NOT_RUN]
    print(format_table(shown) if shown else f"no figures in {args.results}", file=out)
    write_report(rows, args.report, args.partial, args.results)
    counts = summary(rows)
    failed = [r for r in rows if r.failed]
    print("", file=out)
    print("numbers check: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) +
          f"  (results {args.results}, report {args.report})", file=out)
    for r in failed:
        print(f"  {r.verdict}: {r.page}.{r.figure}: {r.detail}", file=out)
    return 1 if failed else 0
