"""A Python model of tenferro-rs's checkpoint chain (why ``checkpoint`` per TRG step overflows).

In tenferro-runtime 0.8.0 every traced value carries ``checkpoint_chain``, a singly linked
list ``Option<Arc<CheckpointNode>>``:

- ``checkpoint`` evaluates the value, makes it a fresh leaf and pushes one node (the old
  graph) whose ``prev`` is the value's previous chain
  (tensor4all/tenferro-rs, tenferro-runtime/src/ad_support.rs @ 023a85d3,
  ``checkpoint_traced_tensor``: ``prev: tensor.checkpoint_chain.take()``);
- every operation folds the chains of its operands with ``CheckpointNode::merge_chains``,
  which rebuilds the whole lhs list on top of the rhs head, without looking for nodes the
  two lists share (tenferro-runtime/src/checkpoint.rs @ 0e3ffa76: "The lhs chain is
  reconstructed on top of the rhs chain").

So the chain of a value is as long as the sum, over all paths from the checkpointed leaves
to the value, of the chains of those leaves. With P paths from T_i to T_(i+1) in one TRG
step, ``L_(i+1) = P * L_i + 1``. This module models exactly that with real linked nodes:

- ``Tracer(merge="concat")`` is tenferro's rule, ``Tracer(merge="union")`` the same graph with
  a merge that keeps every checkpoint once (chain length = number of checkpoints);
- ``fanout_step`` is a step that uses T ``uses`` times (24 for TRG: the recorded counts),
  ``replay_jaxpr`` runs the rule over this book's own JAX step, read from its jaxpr;
- ``square_chain`` is the minimal reproduction (a scalar squared n times: 2^n - 1 nodes);
- ``path_counts`` counts paths input -> output in a jaxpr, ``predicted_lengths`` the chain
  lengths that follow from a path count;
- ``chain_check`` is the "am I hit?" check: chain nodes versus number of checkpoints.

Releasing a chain is left to CPython here (its deallocator is protected against deep
recursion); the crash itself is modelled natively, see ``trglab.native``.
"""

from dataclasses import dataclass

__all__ = [
    "ChainNode", "Value", "Tracer", "MERGES", "chain_length", "distinct_graphs",
    "fanout_step", "replay_jaxpr", "step_jaxpr", "run_checkpointed", "tenferro_trg_chain",
    "jax_trg_chain", "square_chain", "path_counts", "path_table", "step_path_counts", "predicted_lengths",
    "chain_check", "chain_verdict", "RECORDED_CHAIN", "TRG_USES", "SAFE_NODES",
]

#: Chain nodes after steps 1..5 recorded for tenferro 0.8.0 (bin p26_checkpoint, seed 000).
RECORDED_CHAIN = (1, 25, 601, 14425, 346201)
#: Uses of T per TRG step that reproduce the recorded chain: L' = 24 L + 1.
TRG_USES = 24
#: Longest chain released fine by the native drop model on an 8 MiB main stack (measured
#: with native/drop_chain: 100000 ok, 346201 abort). tenferro recorded: 14425 ok, 346201 abort.
SAFE_NODES = 100_000


class ChainNode:
    """One node of a checkpoint chain: ``origin`` (serial number of the checkpoint that
    created it), ``graph`` (label of the frozen graph), ``prev`` (next node or None)."""

    __slots__ = ("origin", "graph", "prev")

    def __init__(self, origin, graph, prev):
        self.origin = origin
        self.graph = graph
        self.prev = prev


def iter_chain(head):
    """Yield the nodes of a chain from its head, iteratively."""
    node = head
    while node is not None:
        yield node
        node = node.prev


def chain_length(head):
    """Number of nodes in the chain starting at ``head`` (0 for None)."""
    return sum(1 for _ in iter_chain(head))


def distinct_graphs(head):
    """Number of distinct checkpoints (frozen graphs) the chain refers to."""
    return len({node.origin for node in iter_chain(head)})


@dataclass(eq=False)
class Value:
    """A traced value of the model: only its checkpoint chain matters."""

    chain: ChainNode | None = None


class Tracer:
    """Builds values and their chains with one merge rule.

    ``merge="concat"``: tenferro's ``merge_chains`` (copy every lhs node onto the rhs head).
    ``merge="union"``: copy only lhs nodes whose checkpoint is not in the rhs chain yet.
    ``copied`` counts the nodes created by merges (the work of building the graph).
    """

    def __init__(self, merge="concat"):
        if merge not in MERGES:
            raise ValueError(f"unknown merge {merge!r}; choose one of {', '.join(MERGES)}")
        self.merge_name = merge
        self._merge = MERGES[merge]
        self.checkpoints = 0
        self.copied = 0

    def leaf(self):
        """A fresh input (no chain)."""
        return Value(None)

    def merge(self, lhs, rhs):
        head, copied = self._merge(lhs, rhs)
        self.copied += copied
        return head

    def apply(self, inputs, n_out=1):
        """An operation on ``inputs`` (Values, repeats allowed): every output gets the fold
        ``merge(merge(merge(None, c1), c2), c3)...`` of the operands' chains, as tenferro does."""
        chain = None
        for v in inputs:
            chain = self.merge(chain, v.chain)
        return [Value(chain) for _ in range(n_out)]

    def checkpoint(self, value, graph=None):
        """Freeze ``value``: a new leaf whose chain is one new node on top of the old chain."""
        self.checkpoints += 1
        return Value(ChainNode(self.checkpoints, graph, value.chain))


def _merge_concat(lhs, rhs):
    """tenferro's merge_chains: (None, r) -> r; (l, None) -> l; else copy all of l onto r."""
    if lhs is None:
        return rhs, 0
    if rhs is None:
        return lhs, 0
    nodes = list(iter_chain(lhs))
    head = rhs
    for node in reversed(nodes):
        head = ChainNode(node.origin, node.graph, head)
    return head, len(nodes)


def _merge_union(lhs, rhs):
    """Set-union merge: copy onto r only the lhs nodes whose checkpoint r lacks."""
    if lhs is None:
        return rhs, 0
    if rhs is None:
        return lhs, 0
    have = {node.origin for node in iter_chain(rhs)}
    missing = [node for node in iter_chain(lhs) if node.origin not in have]
    head = rhs
    for node in reversed(missing):
        head = ChainNode(node.origin, node.graph, head)
    return head, len(missing)


MERGES = {"concat": _merge_concat, "union": _merge_union}


# --- steps ------------------------------------------------------------------------------

def fanout_step(tracer, t, uses=TRG_USES):
    """A step whose output depends on T through ``uses`` paths: ``uses`` unary operations on
    T, summed pairwise (balanced). Returns the output Value."""
    if isinstance(uses, bool) or not isinstance(uses, int) or uses < 1:
        raise ValueError(f"uses must be a positive int, got {uses!r}")
    level = [tracer.apply([t])[0] for _ in range(uses)]
    while len(level) > 1:
        nxt = [tracer.apply([level[i], level[i + 1]])[0] for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


_CALL_PARAMS = ("jaxpr", "call_jaxpr")


def _sub_jaxpr(eqn):
    """The body of a call-like equation (jit, custom_jvp_call, closed_call), else None."""
    for key in _CALL_PARAMS:
        body = eqn.params.get(key)
        if body is not None:
            return getattr(body, "jaxpr", body)
    return None


def _is_literal(var):
    return not hasattr(var, "count") and hasattr(var, "val")


def replay_jaxpr(tracer, jaxpr, inputs):
    """Run the chain rule over a jaxpr (a ``Jaxpr`` or ``ClosedJaxpr``).

    ``inputs``: one Value per ``jaxpr.invars``. Every equation is one ``tracer.apply`` over
    its operands (literals and constants carry no chain); call-like equations are entered.
    Returns one Value per ``jaxpr.outvars``.
    """
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    if len(inputs) != len(jaxpr.invars):
        raise ValueError(f"jaxpr has {len(jaxpr.invars)} inputs, got {len(inputs)} values")
    env = dict(zip(jaxpr.invars, inputs))

    def read(var):
        return Value(None) if _is_literal(var) else env.get(var, Value(None))

    for eqn in jaxpr.eqns:
        args = [read(v) for v in eqn.invars]
        body = _sub_jaxpr(eqn)
        if body is not None and len(body.invars) == len(args):
            outs = replay_jaxpr(tracer, body, args)
        else:
            outs = tracer.apply(args, n_out=len(eqn.outvars))
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def step_jaxpr(k, dim):
    """ClosedJaxpr of this book's ``trg.step(t, k)`` for T of shape (dim,)*4.

    Inputs: [T]; outputs: [T' (k,)*4, ln n]."""
    import jax
    import jax.numpy as jnp

    from ..trg import step

    return jax.make_jaxpr(lambda t: step(t, k))(jnp.zeros((dim,) * 4))


# --- runs ---------------------------------------------------------------------------------

def run_checkpointed(step_fn, steps, merge="concat"):
    """Checkpoint after every step, as ``t.checkpoint(...)`` after each TRG step in the seed.

    ``step_fn(tracer, t, i) -> t_next``. Returns one dict per step with keys step,
    chain_nodes (length of T's chain after the checkpoint), distinct_graphs and copied
    (nodes created by merges during that step).
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    tracer = Tracer(merge)
    t = tracer.apply([tracer.leaf()])[0]  # the site tensor, built from the leaf beta
    rows = []
    for i in range(steps):
        before = tracer.copied
        t = tracer.checkpoint(step_fn(tracer, t, i), graph=f"step {i + 1}")
        rows.append({"step": i + 1, "chain_nodes": chain_length(t.chain),
                     "distinct_graphs": distinct_graphs(t.chain), "copied": tracer.copied - before})
    return rows


def tenferro_trg_chain(steps=5, uses=TRG_USES, merge="concat"):
    """``run_checkpointed`` with ``fanout_step(uses)``: concat gives 1, 25, 601, 14425, 346201."""
    return run_checkpointed(lambda tr, t, i: fanout_step(tr, t, uses), steps, merge)


def jax_trg_chain(ks, merge="concat"):
    """``run_checkpointed`` over this book's JAX TRG step (jaxpr of ``trg.step(t, k)`` for
    the schedule ``ks``), keeping T' (output 0) as the next T."""
    from ..trg import validate_schedule

    ks = validate_schedule(ks)
    dims = (2,) + ks[:-1]
    jaxprs = [step_jaxpr(k, d) for k, d in zip(ks, dims)]
    return run_checkpointed(lambda tr, t, i: replay_jaxpr(tr, jaxprs[i], [t])[0], len(ks), merge)


def square_chain(n, merge="concat"):
    """Minimal reproduction: x <- checkpoint(x * x), n times. Chain nodes after each round
    (concat: 2^i - 1 after round i, union: i)."""
    def square(tracer, x, i):
        return tracer.apply([x, x])[0]

    tracer_rows = run_checkpointed(square, n, merge) if n else []
    return [r["chain_nodes"] for r in tracer_rows]


# --- path counts -------------------------------------------------------------------------

def path_counts(jaxpr, in_counts=None):
    """Number of paths from the inputs to every output of a jaxpr.

    ``in_counts``: paths already reaching each input (default 1 each). An operand used twice
    by one equation (``mul e e``) counts twice, as merge_chains does; call-like equations
    are entered. Returns a list of ints, one per output.
    """
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    if in_counts is None:
        in_counts = [1] * len(jaxpr.invars)
    env = dict(zip(jaxpr.invars, in_counts))

    def read(var):
        return 0 if _is_literal(var) else env.get(var, 0)

    for eqn in jaxpr.eqns:
        args = [read(v) for v in eqn.invars]
        body = _sub_jaxpr(eqn)
        if body is not None and len(body.invars) == len(args):
            outs = path_counts(body, args)
        else:
            outs = [sum(args)] * len(eqn.outvars)
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def path_table(jaxpr):
    """One row per top-level equation of a one-input jaxpr: index, primitive, output
    shapes and the number of paths from the input to its (first) output."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    if len(jaxpr.invars) != 1:
        raise ValueError(f"path_table needs a jaxpr with one input, got {len(jaxpr.invars)}")
    env = {jaxpr.invars[0]: 1}
    rows = []
    for i, eqn in enumerate(jaxpr.eqns):
        args = [0 if _is_literal(v) else env.get(v, 0) for v in eqn.invars]
        body = _sub_jaxpr(eqn)
        outs = path_counts(body, args) if body is not None and len(body.invars) == len(args) \
            else [sum(args)] * len(eqn.outvars)
        env.update(zip(eqn.outvars, outs))
        shapes = ", ".join(f"{v.aval.dtype}{list(v.aval.shape)}" for v in eqn.outvars)
        rows.append({"eqn": i, "primitive": eqn.primitive.name, "outputs": shapes, "paths": outs[0]})
    return rows


def step_path_counts(k=16, dim=16):
    """Paths T -> T' and T -> ln n in this book's ``trg.step`` (default: a chi = 16 bulk step)."""
    t_next, ln_n = path_counts(step_jaxpr(k, dim))
    return {"T_next": t_next, "ln_n": ln_n}


def predicted_lengths(paths, steps):
    """Chain lengths after 1..steps checkpoints when T' has ``paths`` paths from T:
    L_1 = 1, L_(i+1) = paths * L_i + 1."""
    if isinstance(paths, bool) or not isinstance(paths, int) or paths < 1:
        raise ValueError(f"paths must be a positive int, got {paths!r}")
    out, length = [], 0
    for _ in range(steps):
        length = paths * length + 1
        out.append(length)
    return out


# --- the check ----------------------------------------------------------------------------

def chain_check(lengths, safe_nodes=SAFE_NODES):
    """Chain nodes versus number of checkpoints; ``lengths[i]`` = nodes after checkpoint i+1.

    Returns one dict per checkpoint: checkpoints, chain_nodes, per_checkpoint (nodes /
    checkpoints), growth (nodes / previous nodes, None for the first), verdict:
    "ok" (nodes <= checkpoints: each checkpoint held once), "duplicated" (more nodes than
    checkpoints: the merge copies chains), "overflow risk" (duplicated and at least
    ``safe_nodes`` nodes: a recursive release may overflow an 8 MiB stack).
    """
    lengths = list(lengths)
    if not lengths:
        raise ValueError("no chain lengths given")
    for i, n in enumerate(lengths):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"chain length {i} must be a non-negative int, got {n!r}")
    if safe_nodes < 1:
        raise ValueError(f"safe_nodes must be >= 1, got {safe_nodes!r}")
    rows = []
    for i, n in enumerate(lengths):
        c = i + 1
        if n <= c:
            verdict = "ok"
        elif n < safe_nodes:
            verdict = "duplicated"
        else:
            verdict = "overflow risk"
        growth = None if i == 0 or lengths[i - 1] == 0 else n / lengths[i - 1]
        rows.append({"checkpoints": c, "chain_nodes": n, "per_checkpoint": n / c,
                     "growth": growth, "verdict": verdict})
    return rows


def chain_verdict(lengths, safe_nodes=SAFE_NODES):
    """One line: the worst verdict of ``chain_check`` and where it first appears."""
    rows = chain_check(lengths, safe_nodes)
    order = ["ok", "duplicated", "overflow risk"]
    worst = max(rows, key=lambda r: order.index(r["verdict"]))
    if worst["verdict"] == "ok":
        return f"ok: {rows[-1]['chain_nodes']} nodes for {len(rows)} checkpoints"
    first = next(r for r in rows if r["verdict"] == worst["verdict"])
    return (f"{worst['verdict']}: {first['chain_nodes']} nodes after {first['checkpoints']} "
            f"checkpoints ({first['per_checkpoint']:.0f} per checkpoint)")
