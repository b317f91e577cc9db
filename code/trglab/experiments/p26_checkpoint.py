"""p26_checkpoint, JAX side: ``jax.checkpoint`` around every TRG step.

For each depth: the whole-graph gradient d(ln Z/N)/d beta with and without
``jax.checkpoint`` per step (both jitted, compile and run timed apart), and the residuals
that reverse mode saves for the backward pass with and without it.

    python -m trglab.experiments.p26_checkpoint --steps 4 5 6 20

prints one line per depth in the seed's format:

    steps= 5 grad=0.744793433247367 grad with jax.checkpoint per step=...
"""

import argparse
import contextlib
import io
import math
import re
import sys
from functools import partial

from ..grads import lnz_checkpointed, value_and_grad
from ..timing import first_and_steady, timed
from ..trg import lnz_per_site, schedule, validate_schedule

_ITEM_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1,
               "u64": 8, "u32": 4, "u8": 1, "bool": 1, "c64": 8, "c128": 16}
_AVAL = re.compile(r"^\s*([a-z]+\d*)\[([0-9,\s]*)\]")


def grad_pair(beta, ks, repeat=1):
    """Gradient at one depth with and without ``jax.checkpoint`` per step.

    ``ks``: truncation schedule (one int per step). Returns a dict with keys steps, ks,
    grad (whole graph), grad_ckpt (checkpoint per step), diff (grad_ckpt - grad) and, for
    both, the first call (trace + compile + run) and the steady call in ms (minimum of
    ``repeat`` further calls; None when repeat = 0, which halves the cost of deep runs).
    """
    ks = validate_schedule(ks)
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta!r}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 0:
        raise ValueError(f"repeat must be an int >= 0, got {repeat!r}")
    row = {"steps": len(ks), "ks": list(ks)}
    for key, method in (("grad", "whole"), ("grad_ckpt", "checkpoint")):
        call = partial(value_and_grad, beta, ks, method=method)
        if repeat:
            first, steady, (_, g) = first_and_steady(call, repeat=repeat)
        else:
            (first, (_, g)), steady = timed(call), None
        row[key] = g
        row[f"{key}_first_ms"] = first * 1e3
        row[f"{key}_steady_ms"] = None if steady is None else steady * 1e3
    row["diff"] = row["grad_ckpt"] - row["grad"]
    return row


def grad_pairs(beta, chi, steps_list, repeat=1):
    """``grad_pair`` for every depth in steps_list (ascending), schedule ``schedule(chi, n)``."""
    steps_list = _check_steps(steps_list)
    return [grad_pair(beta, schedule(chi, n, beta), repeat) for n in steps_list]


def parse_residuals(text):
    """Residual lines of ``jax.ad_checkpoint.print_saved_residuals`` -> (count, bytes).

    Each line starts with an abstract value such as ``f64[16,16,16,16]`` or ``f64[]``.
    """
    count = nbytes = 0
    for line in text.splitlines():
        m = _AVAL.match(line)
        if not m:
            continue
        dtype, dims = m.group(1), m.group(2).strip()
        if dtype not in _ITEM_BYTES:
            raise ValueError(f"unknown dtype {dtype!r} in residual line: {line.strip()}")
        shape = [int(d) for d in dims.split(",")] if dims else []
        count += 1
        nbytes += _ITEM_BYTES[dtype] * math.prod(shape)
    return count, nbytes


def saved_residuals(beta, ks, checkpoint):
    """(count, bytes, text) of the residuals saved for reverse mode of ln Z/N(beta).

    ``checkpoint``: with ``jax.checkpoint`` around every step (then only the step inputs
    are kept; the rest is recomputed in the backward pass).
    """
    from jax.ad_checkpoint import print_saved_residuals

    ks = validate_schedule(ks)
    fn = lnz_checkpointed if checkpoint else lnz_per_site
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_saved_residuals(partial(fn, ks=ks), float(beta))
    count, nbytes = parse_residuals(buf.getvalue())
    return count, nbytes, buf.getvalue()


def residual_rows(beta, chi, steps_list):
    """Saved residuals with and without ``jax.checkpoint`` for every depth in steps_list.

    Row keys: steps, plain_count, plain_bytes, ckpt_count, ckpt_bytes, ratio (bytes plain /
    bytes with checkpoint).
    """
    rows = []
    for n in _check_steps(steps_list):
        ks = schedule(chi, n, beta)
        pc, pb, _ = saved_residuals(beta, ks, checkpoint=False)
        cc, cb, _ = saved_residuals(beta, ks, checkpoint=True)
        rows.append({"steps": n, "plain_count": pc, "plain_bytes": pb,
                     "ckpt_count": cc, "ckpt_bytes": cb, "ratio": pb / cb})
    return rows


def _check_steps(steps_list):
    try:
        steps = sorted(set(steps_list))
    except TypeError:
        raise ValueError(f"steps must be a list of positive ints, got {steps_list!r}") from None
    if not steps or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in steps):
        raise ValueError(f"steps must be a non-empty list of positive ints, got {steps_list!r}")
    return steps


def labelled(rows, labels):
    """Rows for display: keep the keys of ``labels`` (in its order), renamed to its values."""
    return [{new: row.get(old) for old, new in labels.items()} for row in rows]


def format_line(row):
    """The seed's line: ``steps= 5 grad=... grad with jax.checkpoint per step=...``."""
    return (f"steps={row['steps']:2d} grad={row['grad']:.15f} "
            f"grad with jax.checkpoint per step={row['grad_ckpt']:.15f}")


def plot_chain_growth(recorded, model, replay, union, square_rounds, square, limit):
    """Two log-scale panels: chain nodes per checkpointed TRG step (recorded tenferro, the
    merge_chains model with 24 uses, the replay of this book's jaxpr, the set-union model)
    and the minimal reproduction (chain nodes per round n, 2^n - 1, against n); both with
    ``limit``, the longest chain the native recursive drop releases. Returns the figure.

    ``model``/``replay``/``union``: rows of ``checkpoint_chain.run_checkpointed``;
    ``square``: chain nodes after rounds 1..max(square_rounds).
    """
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    steps = [r["step"] for r in model]
    ax1.semilogy(range(1, len(recorded) + 1), recorded, "o", ms=9, mfc="none", label="tenferro（记录）")
    ax1.semilogy(steps, [r["chain_nodes"] for r in model], "-", label="模型：24 次使用")
    ax1.semilogy(steps, [r["chain_nodes"] for r in replay], "x", ms=8, label="模型：本书 jaxpr 回放")
    ax1.semilogy(steps, [r["chain_nodes"] for r in union], "s-", ms=4, label="模型：集合并")
    ax1.axhline(limit, color="gray", ls="--", label="本机递归释放的上限（8 MiB）")
    ax1.set(xlabel="检查点之后的步数", ylabel="链表节点数", title="每步 checkpoint 的 TRG", xticks=steps)
    ax1.legend(fontsize=8, loc="center right")
    ax2.semilogy(square_rounds, [square[n - 1] for n in square_rounds], "o-", label="模型：x ← x·x")
    ax2.semilogy(square_rounds, square_rounds, "s-", label="集合并：n")
    ax2.axhline(limit, color="gray", ls="--", label="本机递归释放的上限")
    ax2.set(xlabel="轮数 n", ylabel="链表节点数", title="最小复现：2^n − 1")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    return fig


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of usage + message
        self.exit(2, f"error: {message}\n")


def main(argv=None):
    p = _Parser(prog="python -m trglab.experiments.p26_checkpoint",
                description="grad with and without jax.checkpoint per TRG step")
    p.add_argument("--beta", type=float, default=0.3)
    p.add_argument("--chi", type=int, default=16)
    p.add_argument("--steps", type=int, nargs="+", default=[4, 5, 6, 20])
    p.add_argument("--residuals", action="store_true", help="also print the saved residuals")
    args = p.parse_args(argv)
    try:
        if not args.beta > 0 or args.chi < 2:
            raise ValueError(f"need beta > 0 and chi >= 2, got beta={args.beta}, chi={args.chi}")
        steps = _check_steps(args.steps)
        for n in steps:
            print(format_line(grad_pair(args.beta, schedule(args.chi, n, args.beta))), flush=True)
        if args.residuals:
            for r in residual_rows(args.beta, args.chi, steps):
                print(f"steps={r['steps']:2d} saved residuals: {r['plain_count']} arrays "
                      f"{r['plain_bytes']} bytes without, {r['ckpt_count']} arrays "
                      f"{r['ckpt_bytes']} bytes with jax.checkpoint per step")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
