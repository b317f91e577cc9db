"""``python -m trglab page chapters/x/y.ipynb [-p NAME VALUE ...] [-y YAML]``: re-run one page.

The page is executed by papermill (as in the build) into
``_build/runs/<page_id>-<time>/<page_id>.ipynb`` with its figures in ``results/`` beside
it; the command prints one progress line, the figures the page recorded, and how they
compare with ``data/expected`` (only a failure to run makes the exit status non-zero:
other parameters give other figures). Values of ``-p`` are read as YAML, so
``-p steps 8``, ``-p beta 0.44``, ``-p steps_list "[5, 8]"`` have the types they look like.
"""

from __future__ import annotations

import datetime as _dt
import sys
from pathlib import Path

from .build import BuildError, DEFAULT_TIMEOUT_S, execute_page
from .paths import repo_root


def parse_parameters(pairs, yaml_texts) -> dict:
    import yaml

    params = {}
    for text in yaml_texts or []:
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise BuildError(f"-y {text!r} is not valid YAML: {str(exc).splitlines()[0]}") from None
        if not isinstance(doc, dict):
            raise BuildError(f"-y must give a mapping like 'steps: 8', got {text!r}")
        params.update(doc)
    for name, value in pairs or []:
        if not name.isidentifier():
            raise BuildError(f"parameter name must be an identifier, got {name!r}")
        try:
            params[name] = yaml.safe_load(value)
        except yaml.YAMLError:
            params[name] = value
    return params


def add_arguments(parser):
    parser.add_argument("notebook", help="page to run, e.g. chapters/trg/ising_trg.ipynb")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"), default=[],
                        help="set a parameter (value read as YAML); repeatable")
    parser.add_argument("-y", "--yaml", action="append", default=[], help="parameters as a YAML mapping")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="time limit in seconds")
    parser.add_argument("--kernel", default="python3")
    parser.add_argument("--out", default=None, help="run folder (default _build/runs/<page>-<time>)")


def run(args, out=None) -> int:
    out = out or sys.stdout
    from . import check
    from .records import read_results

    root = repo_root()
    src = Path(args.notebook)
    if not src.is_absolute():
        src = (Path.cwd() / src)
    if src.suffix != ".ipynb" or not src.is_file():
        raise BuildError(f"no notebook {args.notebook!r}")
    if args.timeout <= 0:
        raise BuildError("--timeout must be > 0")
    params = parse_parameters(args.parameter, args.yaml)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    folder = Path(args.out) if args.out else root / "_build" / "runs" / f"{src.stem}-{stamp}"
    try:
        rel = src.resolve().relative_to(root)
    except ValueError:
        rel = Path(src.name)
    target = folder / rel
    results = folder / "results"
    r = execute_page(src, target, results, page=str(rel), timeout=args.timeout, parameters=params,
                     kernel=args.kernel, log_path=folder / f"{src.stem}.log")
    verdict = "ok" if r.ok else f"{r.status.upper()}  {r.cell}: {r.error}"
    print(f"{rel}  {r.seconds:.1f} s  {verdict}", file=out)
    print(f"parameters: {r.parameters}", file=out)
    print(f"executed notebook: {target}", file=out)
    fresh = read_results(results)
    if fresh:
        expected = check.load_expected(root / "data" / "expected")
        expected = {k: v for k, v in expected.items() if k in fresh}
        rows = check.check(fresh, expected, partial=True)
        print(check.format_table([x for x in rows if x.verdict != check.NOT_RUN]), file=out)
        if params and any(x.failed for x in rows):
            print("(figures differ from data/expected: expected with other parameters; data/expected holds the "
                  "default parameters' figures)", file=out)
    if not r.ok:
        print(f"log: {r.log}", file=out)
    return 0 if r.ok else 1
