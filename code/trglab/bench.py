"""``make bench``: what differentiating TRG costs, measured in one run and compared as ratios.

    python -m trglab.bench [--steps 5 10 20 40] [--chi 16] [--chi-scaling 8 16 24 32]
                           [--chi-steps 20] [--repeats 3] [--out _build/bench] [--quick]

Every configuration runs in its own child process (``python -m trglab.bench --child``),
so that

- the first call really is the first (trace + compile + run, nothing cached), and
- peak memory is the child's high-water mark ``getrusage(RUSAGE_SELF).ru_maxrss``, read
  once after the imports and the input are ready (``base``) and once at the end (``peak``).
  JAX on CPU has no allocator statistics (``Device.memory_stats()`` returns None there),
  and its buffers are ordinary process memory, so the resident-set high-water mark is
  what works. It includes XLA's compile-time memory, which is real cost too.

Parts (each prints a table; all go into one JSON file ``<out>/bench-<stamp>.json``):

1. methods: value-and-grad at beta, chi, steps in ``--steps`` for ``whole`` (whole graph
   under jit), ``checkpoint`` (jax.checkpoint per step under jit), ``staged`` (one jax.vjp
   per step, each jitted), ``scan`` (trglab.scan), ``fwd_mode`` (one ``jax.jvp`` pass: with
   a single scalar input it is the whole gradient), plus the forward alone (unrolled, jit);
   ``compile``: trace and XLA compile of each single-graph method, nothing run; ``steady``:
   every method and the forward called in turn in one process, min over ``--rounds``;
   ``profile``: one steady call of the forward, ``whole`` and ``fwd_mode`` traced with the
   JAX profiler, XLA CPU thunk time summed by kind (svd, matmul, copy/transpose, ...);
2. one step at chi: time of the step, of its two SVDs and of the contraction, against
   the floating-point work (nominal counts below) divided by this machine's measured
   matrix-multiply rate, a lower bound;
3. chi scaling at ``--chi-steps`` steps for ``--chi-scaling``: forward and value-and-grad
   (scan form), time and memory, and one step's time divided by chi^6;
4. the Gram factorisation option (trglab.fastsvd) vs the exact rule: time and figures;
5. the whole book: seconds per page and total from the build's executed notebooks
   (papermill metadata), or a note that no build has run.

Nominal flop counts: the plaquette contraction (path F3.F2 -> (a,y,z,b), F1.F4 ->
(z,c,e,y), then over y, z) costs 2 (2 chi^5 + chi^6); a thin SVD of an n x n matrix with
both factors about 22 n^3 (Golub & Van Loan, Matrix Computations, Golub-Reinsch count),
n = chi^2, two per step. Timings under load from other users vary; compare ratios within
one run, never absolute times across machines.
"""

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

METHODS = ("whole", "checkpoint", "staged", "scan", "fwd_mode")
DEFAULT_STEPS = (5, 10, 20, 40)
DEFAULT_CHI_SCALING = (8, 16, 24, 32)
PARTS = ("methods", "compile", "steady", "profile", "onestep", "chi", "gram", "book")
PROFILE_FUNCS = ("forward", "whole", "fwd_mode")


# --- child side ----------------------------------------------------------------------------

def _maxrss_mib():
    """High-water mark of this process's resident set, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _fwd_mode_jit(ks):
    """jit of beta -> (ln Z/N, d(ln Z/N)/d beta) by forward mode (``jax.jvp``, tangent 1).

    With one scalar input, one forward-mode pass gives the whole gradient and stores no
    residuals for a backward pass; the unrolled graph, as for ``whole``.
    """
    import jax
    import jax.numpy as jnp

    from . import trg

    def f(b):
        return jax.jvp(lambda x: trg.lnz_per_site(x, ks), (b,), (jnp.ones_like(b),))

    return jax.jit(f)


def _vg_fn(method, beta, ks, step_fn=None):
    """A no-argument callable returning (lnz, grad) floats for ``method``."""
    import jax.numpy as jnp

    from . import grads, scan

    if method == "scan":
        kw = {} if step_fn is None else {"step_fn": step_fn}
        return lambda: scan.value_and_grad_scan(beta, ks, **kw)
    if method == "fwd_mode":
        f = _fwd_mode_jit(ks)
        b = jnp.asarray(beta, dtype=jnp.float64)
        return lambda: tuple(float(x) for x in f(b))
    if method in grads.METHODS:
        return lambda: grads.value_and_grad(beta, ks, method=method)
    raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")


def _forward_fn(beta, ks, form="whole", step_fn=None):
    import jax
    import jax.numpy as jnp

    from . import scan, trg

    if form == "whole":
        f = jax.jit(lambda b: trg.lnz_per_site(b, ks))
    else:
        kw = {} if step_fn is None else {"step_fn": step_fn}
        f = scan.lnz_scan_fn(ks, **kw)
    b = jnp.asarray(beta, dtype=jnp.float64)
    return lambda: (float(f(b)), None)


def _time_first_steady(fn, repeats):
    from .timing import first_and_steady

    first, steady, out = first_and_steady(fn, repeat=repeats)
    return first, steady, out


def run_vg(cfg):
    """Child: value-and-grad (or forward) of one configuration. Returns a result dict."""
    from . import fastsvd, trg

    beta, chi, steps = cfg["beta"], cfg["chi"], cfg["steps"]
    ks = trg.schedule(chi, steps, beta)
    step_fn = fastsvd.step_gram if cfg.get("rule") == "gram" else None
    if cfg["method"] == "forward":
        fn = _forward_fn(beta, ks, cfg.get("form", "whole"), step_fn)
    else:
        fn = _vg_fn(cfg["method"], beta, ks, step_fn)
    base = _maxrss_mib()
    first, steady, (lnz, grad) = _time_first_steady(fn, cfg["repeats"])
    peak = _maxrss_mib()
    return {"first_s": first, "steady_s": steady, "lnz": lnz, "grad": grad,
            "rss_base_mib": base, "rss_peak_mib": peak, "ks": list(ks)}


def run_onestep(cfg):
    """Child: one TRG step at D = k = chi: step, SVD, contraction times and flop bounds."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from . import trg
    from .svd import truncated_svd
    from .timing import first_and_steady

    chi, repeats = cfg["chi"], cfg["repeats"]
    n = chi * chi
    rng = np.random.default_rng(0)
    t = jnp.asarray(rng.standard_normal((chi,) * 4))
    m = t.reshape(n, n)
    f = jnp.asarray(rng.standard_normal((chi,) * 3))
    step = jax.jit(lambda t: trg.step(t, chi))
    svd = jax.jit(lambda m: truncated_svd(m, chi))
    contract = jax.jit(trg.contract_plaquette)
    g = 1024
    a = jnp.asarray(rng.standard_normal((g, g)))
    gemm = jax.jit(lambda a: a @ a)
    base = _maxrss_mib()
    out = {}
    for name, fn, args in (("step", step, (t,)), ("svd", svd, (m,)),
                           ("contract", contract, (f, f, f, f)), ("gemm", gemm, (a,))):
        _, steady, _ = first_and_steady(fn, *args, repeat=repeats)
        out[f"{name}_s"] = steady
    gemm_rate = 2.0 * g**3 / out["gemm_s"]
    flops_contract = 2.0 * (2 * chi**5 + chi**6)
    flops_svd = 22.0 * n**3
    flops_step = flops_contract + 2 * flops_svd
    out.update({
        "chi": chi, "gemm_flops_per_s": gemm_rate,
        "flops_contract": flops_contract, "flops_svd": flops_svd, "flops_step": flops_step,
        "bound_step_s": flops_step / gemm_rate,
        "svd_share": 2 * out["svd_s"] / out["step_s"],
        "step_s_per_chi6": out["step_s"] / chi**6,
        "rss_base_mib": base, "rss_peak_mib": _maxrss_mib(),
    })
    return out


def run_steady(cfg):
    """Child: steady times of the forward and every method, interleaved round-robin.

    All functions are compiled first, then called in turn for ``rounds`` rounds; each
    gets the minimum over its calls. Load from other users then hits all methods alike,
    so the ratios to the forward are far more stable than from separate processes.
    """
    from . import trg

    beta, chi, steps = cfg["beta"], cfg["chi"], cfg["steps"]
    ks = trg.schedule(chi, steps, beta)
    fns = {"forward": _forward_fn(beta, ks, "whole")}
    for m in cfg["methods"]:
        fns[m] = _vg_fn(m, beta, ks)
    for fn in fns.values():
        fn()  # compile
    best = {name: float("inf") for name in fns}
    for _ in range(cfg["rounds"]):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()  # returns Python floats: the computation has finished
            best[name] = min(best[name], time.perf_counter() - t0)
    return {"steady_s": best, "ratio_to_forward": {k: v / best["forward"] for k, v in best.items()}}


def run_compile(cfg):
    """Child: trace and XLA compile time of value-and-grad under jit, nothing executed.

    ``jax.jit(f).lower(beta)`` (trace + lowering) and ``.compile()``, timed separately; for
    ``whole``, ``checkpoint`` and ``scan`` (staged compiles one small graph per step shape).
    """
    import jax
    import jax.numpy as jnp

    from . import grads, scan, trg

    beta, chi, steps, method = cfg["beta"], cfg["chi"], cfg["steps"], cfg["method"]
    ks = trg.schedule(chi, steps, beta)
    if method == "scan":
        fn = scan.value_and_grad_scan_fn(ks)
    elif method == "fwd_mode":
        fn = _fwd_mode_jit(ks)
    elif method in ("whole", "checkpoint"):
        fn = grads._compiled(method, ks, True)
    else:
        raise ValueError(f"compile part: method {method!r} has no single jitted graph")
    b = jnp.asarray(beta, dtype=jnp.float64)
    t0 = time.perf_counter()
    lowered = fn.lower(b)
    t1 = time.perf_counter()
    lowered.compile()
    t2 = time.perf_counter()
    return {"trace_s": t1 - t0, "compile_s": t2 - t1, "trace_compile_s": t2 - t0,
            "rss_peak_mib": _maxrss_mib(), "rss_base_mib": 0.0, "jax": jax.__version__}


def op_category(name):
    """Category of one XLA CPU thunk in a profiler trace, by its HLO name.

    ``svd`` (LAPACK custom call), ``matmul`` (dot, and the fusions XLA hands to its
    matrix-multiply library, ``ynn_fusion``), ``copy/transpose`` (layout changes),
    ``elementwise`` (other fusions and ops); None for events that are not thunks.
    """
    import re

    base = re.sub(r"[._]\d+$", "", name)
    if name.startswith(("$", "end:", "bench:")) or " " in name or "::" in name:
        return None
    if base == "svd" or base.startswith("svd"):
        return "svd"
    if base.startswith(("dot", "ynn_fusion", "convolution")) or "dot" in base.split("_"):
        return "matmul"
    if "copy" in base or "transpose" in base:
        return "copy/transpose"
    return "elementwise"


def run_profile(cfg):
    """Child: where the time of one steady call goes, from a JAX profiler trace.

    For each function in ``funcs`` (forward alone, ``whole`` value-and-grad, ``fwd_mode``),
    compiled and run once first, ``calls`` calls are traced inside
    ``jax.profiler.TraceAnnotation`` markers; the XLA CPU thunks inside each marker are
    summed by ``op_category``. Reports per function the fastest call's wall time and its
    milliseconds per category, summed over the innermost thunk events of every thread
    ("untraced": wall time minus that sum, at least 0; XLA may run two thunks at once on
    two cores, so the categories can add up to more than the wall time).
    """
    import collections
    import glob
    import gzip
    import shutil
    import tempfile

    import jax
    import jax.numpy as jnp

    from . import grads, trg

    beta, chi, steps = cfg["beta"], cfg["chi"], cfg["steps"]
    ks = trg.schedule(chi, steps, beta)
    b = jnp.asarray(beta, dtype=jnp.float64)
    fns = {"forward": jax.jit(lambda x: trg.lnz_per_site(x, ks)),
           "whole": grads._compiled("whole", ks, True), "fwd_mode": _fwd_mode_jit(ks)}
    fns = {k: fns[k] for k in cfg["funcs"]}
    for fn in fns.values():
        jax.block_until_ready(fn(b))
    tmp = tempfile.mkdtemp(prefix="trglab-profile-")
    try:
        with jax.profiler.trace(tmp, create_perfetto_trace=True):
            for i in range(cfg["calls"]):
                for name, fn in fns.items():
                    with jax.profiler.TraceAnnotation(f"bench:{name}:{i}"):
                        jax.block_until_ready(fn(b))
        found = glob.glob(f"{tmp}/**/*.trace.json.gz", recursive=True)
        if not found:
            raise RuntimeError("the profiler wrote no perfetto trace")
        with gzip.open(found[0]) as fh:
            events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    marks = [e for e in events if e["name"].startswith("bench:")]
    if not marks:
        raise RuntimeError("no bench markers in the profiler trace")
    thunks = []
    by_thread = collections.defaultdict(list)
    for e in events:
        if op_category(e["name"]) is not None:
            by_thread[(e.get("pid"), e.get("tid"))].append(e)
    for evs in by_thread.values():  # leaves only: an event that encloses another is a parent
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        for j, e in enumerate(evs):
            nxt = evs[j + 1] if j + 1 < len(evs) else None
            if nxt is not None and nxt["ts"] < e["ts"] + e["dur"]:
                continue
            thunks.append((e["ts"], e["dur"], op_category(e["name"])))
    best = {}
    for m in marks:
        _, name, _ = m["name"].split(":")
        t0, t1 = m["ts"], m["ts"] + m["dur"]
        cat = collections.defaultdict(float)
        for ts, dur, c in thunks:
            if t0 <= ts <= t1:
                cat[c] += dur
        wall = m["dur"] / 1e3
        if name not in best or wall < best[name]["wall_ms"]:
            ms = {c: v / 1e3 for c, v in cat.items()}
            ms["untraced"] = max(0.0, wall - sum(ms.values()))
            best[name] = {"wall_ms": wall, "ms": ms}
    return {"funcs": best, "ks": list(ks)}


CHILD_KINDS = {"vg": run_vg, "onestep": run_onestep, "steady": run_steady, "compile": run_compile,
               "profile": run_profile}


def child_main(cfg_json):
    """Entry of ``--child``: run one config, print one JSON line."""
    import trglab  # noqa: F401  (float64)

    cfg = json.loads(cfg_json)
    kind = cfg.get("kind")
    if kind not in CHILD_KINDS:
        raise SystemExit(f"bench child: unknown kind {kind!r}")
    res = CHILD_KINDS[kind](cfg)
    print("BENCH_RESULT " + json.dumps(res), flush=True)


# --- parent side ---------------------------------------------------------------------------

def run_child(cfg, timeout):
    """Run one config in a fresh interpreter; returns cfg + results (or an error field)."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-m", "trglab.bench", "--child", json.dumps(cfg)],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**cfg, "error": f"timeout after {timeout} s", "wall_s": time.perf_counter() - t0}
    row = {**cfg, "wall_s": time.perf_counter() - t0}
    for line in p.stdout.splitlines():
        if line.startswith("BENCH_RESULT "):
            row.update(json.loads(line[len("BENCH_RESULT "):]))
            return row
    tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
    row["error"] = f"exit {p.returncode}: {tail}"
    return row


def machine_info():
    """CPU model, cores, load, versions: printed with every table."""
    import jax

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": model, "cores": os.cpu_count(), "platform": platform.platform(),
        "python": platform.python_version(), "jax": jax.__version__,
        "loadavg_start": list(os.getloadavg()),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def book_timings(build_dir):
    """Seconds per page from the build's executed notebooks (papermill metadata).

    Looks in ``<build>/html/_sources`` (the published copies), then in the newest
    ``<build>/staging/<id>/``. Returns {"source": path, "pages": [{"page", "seconds"}],
    "total_s": float} or {"note": "..."} when no build has run.
    """
    build_dir = Path(build_dir)
    candidates = [build_dir / "html" / "_sources"]
    staging = build_dir / "staging"
    if staging.is_dir():
        runs = sorted((p for p in staging.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
        candidates += list(reversed(runs))
    for root in candidates:
        if not root.is_dir():
            continue
        pages = []
        for nb in sorted(root.rglob("*.ipynb")):
            try:
                meta = json.loads(nb.read_text(encoding="utf-8")).get("metadata", {})
            except (OSError, ValueError):
                continue
            pm = meta.get("papermill") or {}
            if pm.get("duration") is not None:
                pages.append({"page": nb.stem, "seconds": float(pm["duration"]),
                              "status": pm.get("exception") and "failed" or "ok",
                              "end_time": pm.get("end_time")})
        if pages:
            return {"source": str(root), "pages": pages,
                    "total_s": sum(p["seconds"] for p in pages),
                    "max_s": max(p["seconds"] for p in pages)}
    return {"note": f"no executed notebooks with papermill timings under {build_dir} "
                    "(run `make book` first); book timings skipped"}


def plan(args):
    """The list of child configs for the parts selected by ``args``."""
    beta, reps = args.beta, args.repeats
    cfgs = []
    parts = set(args.parts)
    for steps in args.steps if "methods" in parts else ():
        cfgs.append({"part": "methods", "kind": "vg", "method": "forward", "form": "whole",
                     "beta": beta, "chi": args.chi, "steps": steps, "repeats": reps})
        for m in args.methods:
            cfgs.append({"part": "methods", "kind": "vg", "method": m, "beta": beta,
                         "chi": args.chi, "steps": steps, "repeats": reps})
    for steps in args.steps if "compile" in parts else ():
        for m in args.methods:
            if m != "staged":
                cfgs.append({"part": "compile", "kind": "compile", "method": m, "beta": beta,
                             "chi": args.chi, "steps": steps})
    for steps in args.steady_steps if "steady" in parts else ():
        cfgs.append({"part": "steady", "kind": "steady", "beta": beta, "chi": args.chi,
                     "steps": steps, "methods": list(args.methods), "rounds": args.rounds})
    if "profile" in parts:
        cfgs.append({"part": "profile", "kind": "profile", "beta": beta, "chi": args.chi,
                     "steps": args.profile_steps, "funcs": list(PROFILE_FUNCS),
                     "calls": args.rounds})
    for chi in sorted(set([args.chi] + list(args.chi_scaling))) if "onestep" in parts else ():
        cfgs.append({"part": "onestep", "kind": "onestep", "chi": chi, "repeats": reps})
    for chi in args.chi_scaling if "chi" in parts else ():
        for method in ("forward", "scan"):
            cfgs.append({"part": "chi", "kind": "vg", "method": method, "form": "scan",
                         "beta": beta, "chi": chi, "steps": args.chi_steps,
                         "repeats": args.chi_repeats})
    if "gram" in parts and not args.no_gram:
        for rule in ("exact", "gram"):
            for method in ("forward", "scan"):
                cfgs.append({"part": "gram", "kind": "vg", "method": method, "form": "scan",
                             "rule": rule, "beta": beta, "chi": args.chi,
                             "steps": args.gram_steps, "repeats": reps})
    return cfgs


def _fmt(x, spec=".3f"):
    if x is None:
        return "-"
    if isinstance(x, float):
        return format(x, spec)
    return str(x)


def format_table(rows, columns, title=None):
    """Plain-text table; columns = [(header, key, format spec)]."""
    head = [h for h, _, _ in columns]
    body = [[r.get("error", "") if k == "__err__" else _fmt(r.get(k), spec) for _, k, spec in columns]
            for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    lines = [title] if title else []
    lines.append("  ".join(h.rjust(w) for h, w in zip(head, widths)))
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(b, widths)) for b in body]
    return "\n".join(lines)


METHOD_COLUMNS = [("steps", "steps", ""), ("method", "method", ""), ("first s", "first_s", ".3f"),
                  ("steady s", "steady_s", ".3f"), ("steady/fwd", "steady_over_forward", ".2f"),
                  ("first/first@10", "first_over_first10", ".2f"), ("peak MiB", "rss_peak_mib", ".0f"),
                  ("+MiB", "rss_delta_mib", ".0f"), ("grad", "grad", ".15f"), ("error", "__err__", "")]
ONESTEP_COLUMNS = [("chi", "chi", ""), ("step s", "step_s", ".4f"), ("svd s", "svd_s", ".4f"),
                   ("2 svd / step", "svd_share", ".2f"), ("contract s", "contract_s", ".5f"),
                   ("flops/step", "flops_step", ".3g"), ("bound s", "bound_step_s", ".4f"),
                   ("step/bound", "step_over_bound", ".1f"), ("step s/chi^6", "step_s_per_chi6", ".3g"),
                   ("error", "__err__", "")]
CHI_COLUMNS = [("chi", "chi", ""), ("steps", "steps", ""), ("method", "method", ""),
               ("first s", "first_s", ".3f"), ("steady s", "steady_s", ".3f"),
               ("steady/chi^6 (x1e6)", "steady_per_chi6_e6", ".3f"), ("peak MiB", "rss_peak_mib", ".0f"),
               ("+MiB", "rss_delta_mib", ".0f"), ("error", "__err__", "")]
GRAM_COLUMNS = [("rule", "rule", ""), ("method", "method", ""), ("first s", "first_s", ".3f"),
                ("steady s", "steady_s", ".3f"), ("lnz", "lnz", ".15f"), ("grad", "grad", ".15f"),
                ("|rel diff| vs exact", "rel_diff", ".1e"), ("error", "__err__", "")]
COMPILE_COLUMNS = [("steps", "steps", ""), ("method", "method", ""), ("trace s", "trace_s", ".3f"),
                   ("compile s", "compile_s", ".3f"), ("trace+compile s", "trace_compile_s", ".3f"),
                   ("/ same method @10", "tc_over_10", ".2f"), ("error", "__err__", "")]
STEADY_COLUMNS = [("steps", "steps", ""), ("method", "method", ""), ("steady s", "steady_s", ".3f"),
                  ("/ forward", "ratio", ".2f"), ("rounds", "rounds", ""), ("error", "__err__", "")]


def _flatten(rows, part, name_key, expand):
    """Rows of one part, each expanded by ``expand(row)`` into table rows; a failed
    config gives one row with its error (``name_key`` set to "-")."""
    out = []
    for r in rows:
        if r.get("part") != part:
            continue
        if "error" in r:
            out.append({"steps": r["steps"], name_key: "-", "error": r["error"]})
        else:
            out.extend(expand(r))
    return out


def steady_rows(rows):
    """The interleaved steady results flattened to one row per (steps, method)."""
    return _flatten(rows, "steady", "method", lambda r: [
        {"steps": r["steps"], "method": m, "steady_s": sec, "ratio": r["ratio_to_forward"][m],
         "rounds": r["rounds"]} for m, sec in r["steady_s"].items()])


PROFILE_COLUMNS = [("steps", "steps", ""), ("function", "func", ""), ("wall ms", "wall_ms", ".1f"),
                   ("svd ms", "svd_ms", ".1f"), ("matmul ms", "matmul_ms", ".1f"),
                   ("copy/transpose ms", "copy_ms", ".1f"), ("elementwise ms", "elementwise_ms", ".1f"),
                   ("untraced ms", "untraced_ms", ".1f"), ("svd share", "svd_share", ".2f"),
                   ("/ forward", "ratio", ".2f"), ("error", "__err__", "")]
_PROFILE_KEYS = {"svd": "svd_ms", "matmul": "matmul_ms", "copy/transpose": "copy_ms",
                 "elementwise": "elementwise_ms", "untraced": "untraced_ms"}


def profile_rows(rows):
    """The profile part flattened to one row per traced function (ms per op category)."""
    def expand(r):
        fwd = r["funcs"].get("forward")
        out = []
        for name, f in r["funcs"].items():
            row = {"steps": r["steps"], "func": name, "wall_ms": f["wall_ms"],
                   "svd_share": f["ms"].get("svd", 0.0) / f["wall_ms"]}
            for c, key in _PROFILE_KEYS.items():
                row[key] = f["ms"].get(c, 0.0)
            if fwd:
                row["ratio"] = f["wall_ms"] / fwd["wall_ms"]
            out.append(row)
        return out

    return _flatten(rows, "profile", "func", expand)


BOOK_COLUMNS = [("page", "page", ""), ("seconds", "seconds", ".1f"), ("status", "status", "")]


def derive(results):
    """Add the ratio columns (same-run comparisons) to the result rows, in place."""
    rows = results["rows"]
    for r in rows:
        if "rss_peak_mib" in r:
            r["rss_delta_mib"] = r["rss_peak_mib"] - r["rss_base_mib"]
    fwd = {r["steps"]: r for r in rows if r["part"] == "methods" and r["method"] == "forward"}
    first10 = {r["method"]: r for r in rows if r["part"] == "methods" and r.get("steps") == 10}
    for r in rows:
        if r["part"] != "methods" or "steady_s" not in r:
            continue
        f = fwd.get(r["steps"])
        if f and "steady_s" in f and r["method"] != "forward":
            r["steady_over_forward"] = r["steady_s"] / f["steady_s"]
        ref = first10.get(r["method"])
        if ref and "first_s" in ref:
            r["first_over_first10"] = r["first_s"] / ref["first_s"]
        if r["method"] == "forward":
            r["grad"] = None
    tc10 = {r["method"]: r for r in rows if r["part"] == "compile" and r.get("steps") == 10}
    for r in rows:
        ref = tc10.get(r.get("method"))
        if r["part"] == "compile" and "trace_compile_s" in r and ref and "trace_compile_s" in ref:
            r["tc_over_10"] = r["trace_compile_s"] / ref["trace_compile_s"]
    for r in rows:
        if r["part"] == "onestep" and "step_s" in r:
            r["step_over_bound"] = r["step_s"] / r["bound_step_s"]
        if r["part"] == "chi" and "steady_s" in r:
            r["steady_per_chi6_e6"] = r["steady_s"] / r["chi"] ** 6 * 1e6
    exact = {r["method"]: r for r in rows if r["part"] == "gram" and r.get("rule") == "exact"}
    for r in rows:
        if r["part"] == "gram" and "lnz" in r:
            ex = exact.get(r["method"])
            if ex and "lnz" in ex:
                key = "grad" if r["method"] != "forward" else "lnz"
                r["rel_diff"] = abs(r[key] - ex[key]) / abs(ex[key])
    return results


def summary(results):
    """The target checks, as a dict of named figures (None where not measured)."""
    rows = [r for r in results["rows"] if "error" not in r]
    by = {(r["part"], r.get("method"), r.get("steps"), r.get("rule")): r for r in rows}
    out = {}
    s10, s40 = by.get(("methods", "scan", 10, None)), by.get(("methods", "scan", 40, None))
    if s10 and s40:
        out["scan_first_40_over_10"] = s40["first_s"] / s10["first_s"]
    w10, w40 = by.get(("methods", "whole", 10, None)), by.get(("methods", "whole", 40, None))
    if w10 and w40:
        out["whole_first_40_over_10"] = w40["first_s"] / w10["first_s"]
    for m in METHODS:
        r = by.get(("methods", m, 20, None))
        if r and "steady_over_forward" in r:
            out[f"{m}_steady_over_forward_20"] = r["steady_over_forward"]
    for r in rows:
        if r["part"] == "compile" and r.get("steps") == 40 and "tc_over_10" in r:
            out[f"{r['method']}_trace_compile_40_over_10"] = r["tc_over_10"]
    for r in rows:
        if r["part"] == "steady" and r.get("steps") == 20:
            for m, v in r["ratio_to_forward"].items():
                if m != "forward":
                    out[f"{m}_steady_over_forward_20_interleaved"] = v
    for r in profile_rows(rows):
        if r.get("steps") == 20 and "ratio" in r and r["func"] != "forward":
            out[f"{r['func']}_profiled_over_forward_20"] = r["ratio"]
        if r.get("steps") == 20 and r["func"] == "forward":
            out["forward_svd_share_20"] = r["svd_share"]
    gram_rows = {r.get("rule"): r for r in rows if r["part"] == "gram" and r.get("method") == "forward"}
    g, e = gram_rows.get("gram"), gram_rows.get("exact")
    if g and e:
        out["gram_forward_speedup"] = e["steady_s"] / g["steady_s"]
    return out


def render_text(results):
    """All tables of one bench run as text (what ``make bench`` prints)."""
    m = results["machine"]
    rows = results["rows"]
    parts = [f"trglab bench  {m['date']}  {m['cpu']}, {m['cores']} cores, jax {m['jax']}, "
             f"load {m['loadavg_start'][0]:.1f} -> {m.get('loadavg_end', [0])[0]:.1f}"]
    a = results["args"]
    mf = results.get("merged_from")
    if mf:
        parts.append(f"({mf['rows']} rows kept from {mf['path']}, measured "
                     f"{(mf.get('machine') or {}).get('date', '?')})")
    sel = [r for r in rows if r["part"] == "methods"]
    if sel:
        parts.append(format_table(sel, METHOD_COLUMNS,
                                  f"\nvalue-and-grad, beta = {sel[0].get('beta', a.get('beta'))}, "
                                  f"chi = {sel[0].get('chi', a.get('chi'))} (first = trace + compile + run; "
                                  f"steady = min of {sel[0].get('repeats', a.get('repeats'))},"
                                  " one process per row)"))
    sel = [r for r in rows if r["part"] == "compile"]
    if sel:
        parts.append(format_table(sel, COMPILE_COLUMNS,
                                  "\ntrace + XLA compile of value-and-grad under jit, nothing run "
                                  "(one process per row)"))
    sel = steady_rows(rows)
    if sel:
        parts.append(format_table(sel, STEADY_COLUMNS,
                                  "\nsteady calls interleaved in one process (min over rounds; "
                                  "ratio to the forward alone)"))
    sel = profile_rows(rows)
    if sel:
        parts.append(format_table(sel, PROFILE_COLUMNS,
                                  "\nwhere one steady call spends its time (JAX profiler trace, XLA CPU "
                                  "thunks by kind; fastest of the traced calls)"))
    sel = [r for r in rows if r["part"] == "onestep"]
    if sel:
        parts.append(format_table(sel, ONESTEP_COLUMNS,
                                  "\none step at D = k = chi (steady; bound = nominal flops / measured GEMM rate)"))
    sel = [r for r in rows if r["part"] == "chi"]
    if sel:
        parts.append(format_table(sel, CHI_COLUMNS, "\nchi scaling (scan form)"))
    sel = [r for r in rows if r["part"] == "gram"]
    if sel:
        parts.append(format_table(sel, GRAM_COLUMNS,
                                  f"\nGram (eigh) factorisation vs exact SVD rule, chi = {sel[0].get('chi')}, "
                                  f"{sel[0].get('steps')} steps, scan form"))
    book = results.get("book", {})
    if "pages" in book:
        parts.append(format_table(book["pages"], BOOK_COLUMNS,
                                  f"\nbook build ({book['source']}): total {book['total_s']:.1f} s, "
                                  f"slowest page {book['max_s']:.1f} s"))
    elif book:
        parts.append("\nbook: " + book["note"])
    s = results.get("summary", {})
    if s:
        parts.append("\ntargets: " + ", ".join(f"{k} = {v:.2f}" for k, v in s.items()))
    return "\n".join(parts)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m trglab.bench", description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, nargs="+", default=list(DEFAULT_STEPS))
    p.add_argument("--chi", type=int, default=16, help="chi of the methods table (default 16)")
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--chi-scaling", type=int, nargs="*", default=list(DEFAULT_CHI_SCALING))
    p.add_argument("--chi-steps", type=int, default=20, help="steps for chi scaling (default 20)")
    p.add_argument("--chi-repeats", type=int, default=1, help="steady repeats for chi scaling (default 1)")
    p.add_argument("--gram-steps", type=int, default=20, help="steps for the Gram comparison")
    p.add_argument("--no-gram", action="store_true", help="skip the Gram factorisation part")
    p.add_argument("--steady-steps", type=int, nargs="*", default=[20],
                   help="steps for the interleaved steady-time comparison (default 20)")
    p.add_argument("--rounds", type=int, default=5, help="rounds of the interleaved comparison "
                   "(and traced calls of the profile part)")
    p.add_argument("--profile-steps", type=int, default=20, help="steps for the profile part (default 20)")
    p.add_argument("--beta", type=float, default=0.3)
    p.add_argument("--repeats", type=int, default=3, help="steady repeats (min is reported)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per child config")
    p.add_argument("--out", default=None, help="output folder (default <repo>/_build/bench; "
                   "<repo>/_build/bench/quick with --quick)")
    p.add_argument("--build-dir", default=None, help="the book's build folder (default <repo>/_build)")
    p.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS,
                   help="which parts to run (default: all)")
    p.add_argument("--merge", default=None,
                   help="a previous bench JSON (e.g. a stopped run's partial.json): its rows of "
                        "parts not run now are kept")
    p.add_argument("--quick", action="store_true",
                   help="tiny run for smoke tests: steps 2 3, chi 4, no chi scaling, 1 repeat")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.chi, args.chi_scaling, args.repeats = [2, 3], 4, [], 1
        args.steady_steps, args.rounds = [3], 1
        args.profile_steps = 3
        args.gram_steps = 3
    for name in ("steps", "chi_scaling"):
        bad = [v for v in getattr(args, name) if v < 1]
        if bad:
            p.error(f"--{name.replace('_', '-')} values must be positive, got {bad}")
    if args.chi < 2 or any(c < 2 for c in args.chi_scaling):
        p.error("chi must be >= 2")
    if args.repeats < 1 or args.chi_repeats < 1 or args.rounds < 1:
        p.error("--repeats must be >= 1")
    if not 0 < args.beta < 10:
        p.error(f"--beta must be in (0, 10), got {args.beta}")
    return args


def run(args, log=print, partial_path=None):
    """Run every planned config in a child process; return the results dict (with summary)."""
    from .paths import repo_root

    results = {"machine": machine_info(), "rows": [],
               "args": {k: v for k, v in vars(args).items() if k != "child"},
               "memory_method": "ru_maxrss of a fresh child process per config "
                                "(base: after imports and input; peak: after all calls)"}
    cfgs = plan(args)
    if args.merge:
        old = json.loads(Path(args.merge).read_text(encoding="utf-8"))
        kept = [r for r in old.get("rows", []) if r.get("part") not in args.parts]
        results["rows"] += kept
        results["merged_from"] = {"path": str(args.merge), "rows": len(kept),
                                  "machine": old.get("machine")}
        log(f"kept {len(kept)} rows from {args.merge}")
    for i, cfg in enumerate(cfgs, 1):
        row = run_child(cfg, args.timeout)
        results["rows"].append(row)
        what = " ".join(f"{k}={cfg[k]}" for k in ("part", "method", "rule", "chi", "steps") if k in cfg)
        if "error" in row:
            status = row["error"]
        elif "compile_s" in row:
            status = f"trace {row['trace_s']:.3f} s, compile {row['compile_s']:.3f} s"
        elif "funcs" in row:
            status = ", ".join(f"{k} {v['wall_ms']:.0f} ms (svd {v['ms'].get('svd', 0):.0f})"
                               for k, v in row["funcs"].items())
        elif "ratio_to_forward" in row:
            status = ", ".join(f"{k} {v:.2f}x" for k, v in row["ratio_to_forward"].items())
        elif "first_s" in row:
            status = f"first {row['first_s']:.3f} s, steady {row['steady_s']:.3f} s"
        else:
            status = f"step {row['step_s']:.4f} s"
        log(f"[{i}/{len(cfgs)}] {what}: {status} ({row['wall_s']:.1f} s)")
        if partial_path is not None:  # keep what is measured if the run is stopped
            Path(partial_path).parent.mkdir(parents=True, exist_ok=True)
            Path(partial_path).write_text(json.dumps(results, indent=1), encoding="utf-8")
    results["machine"]["loadavg_end"] = list(os.getloadavg())
    build_dir = Path(args.build_dir) if args.build_dir else repo_root() / "_build"
    results["book"] = book_timings(build_dir) if "book" in args.parts else {}
    derive(results)
    results["summary"] = summary(results)
    return results


def write_results(results, out_dir):
    """Write ``bench-<stamp>.json`` and ``latest.json`` (atomic); return the stamped path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    text = json.dumps(results, indent=1, ensure_ascii=False)
    path = out_dir / f"bench-{stamp}.json"
    for target in (path, out_dir / "latest.json"):
        tmp = target.with_suffix(".json.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    return path


def main(argv=None):
    args = parse_args(argv)
    if args.child is not None:
        child_main(args.child)
        return 0
    import signal

    import trglab  # noqa: F401
    from .paths import repo_root

    # SIGTERM -> SystemExit, so that subprocess.run kills the running child on the way out
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # a --quick smoke run never replaces the latest real run that the mainline page shows
    default_out = repo_root() / "_build" / "bench" / ("quick" if args.quick else "")
    out_dir = Path(args.out) if args.out else default_out
    t0 = time.perf_counter()
    results = run(args, partial_path=out_dir / "partial.json")
    results["bench_wall_s"] = time.perf_counter() - t0
    print(render_text(results))
    path = write_results(results, out_dir)
    (out_dir / "partial.json").unlink(missing_ok=True)
    print(f"\nwrote {path} ({results['bench_wall_s']:.0f} s)")
    return 1 if any("error" in r for r in results["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
