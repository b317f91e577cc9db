"""An executable model of computegraph's value keys, and why a transform over them can
take time exponential in the depth of the graph.

What it models (tensor4all/computegraph-rs, ``src/types.rs``, commit 594cdcec):

- a value's key is ``Input(name)`` or ``Derived {operation: Arc<OperationKey>, output_slot}``;
- ``OperationKey`` holds the operation, the input *keys* (recursively) and a structural
  fingerprint computed once at construction; the hash of a key is that cached
  fingerprint (cheap);
- ``ValueKey::eq`` is a pointer check on the ``Arc`` and otherwise a full structural
  comparison of the two ``OperationKey`` s, which compares their input keys with
  ``ValueKey::eq`` again. Nothing remembers pairs already found equal.

So when two equal keys are held in *different* objects all the way down (the graph was
built twice, or a transform re-creates keys), one hash-map hit walks the whole DAG below
the key as a tree: its cost is the number of paths, i.e. grows like (uses per layer)^depth.
In the chain y <- (y * y) / 2 each value is used twice, so the cost doubles per layer; in
a TRG-like step the tensor T reaches the next T along 24 paths.

The model here: ``transform(program, depth, mode)`` builds the program's graph twice
(copy A and copy B, as a transform that re-creates keys would), puts every value key of
copy A into a dict, then looks up every key of copy B in it, counting the structural
``OperationKey`` comparisons and timing the lookups. Three modes:

- ``"naive"``: as upstream (pointer check, else structural recursion, no memo);
- ``"interned"``: hash-consed keys, equal keys are the same object, so a hit is a pointer
  check (zero structural comparisons);
- ``"memoized"``: structural equality that remembers pairs of operation keys already
  proven equal during one transform (each pair compared once: linear).

Python dicts check identity before ``__eq__``, exactly like ``Arc::ptr_eq`` first.
"""

import time
from dataclasses import dataclass

MODES = ("naive", "interned", "memoized")


class KeyModel:
    """The equality semantics shared by all keys of one experiment, and its counters.

    ``op_comparisons``: structural ``OperationKey`` comparisons performed (the unit of
    work of ``ValueKey::eq`` beyond the pointer check); ``value_eq_calls``: calls of
    value-key equality (those not settled by the dict's identity check).
    """

    def __init__(self, mode="naive"):
        if mode not in MODES:
            raise ValueError(f"unknown key mode {mode!r}; choose one of {', '.join(MODES)}")
        self.mode = mode
        self.op_comparisons = 0
        self.value_eq_calls = 0
        self._memo = set()
        self._interned = {}

    def reset_counters(self):
        self.op_comparisons = 0
        self.value_eq_calls = 0
        self._memo.clear()

    def builder(self):
        """A fresh graph builder whose keys follow this model."""
        return GraphBuilder(self)

    # --- equality ------------------------------------------------------------------
    def value_eq(self, a, b):
        self.value_eq_calls += 1
        if a.operation is None or b.operation is None:
            return a.operation is None and b.operation is None and a.name == b.name
        if a.slot != b.slot:
            return False
        if a.operation is b.operation:  # Arc::ptr_eq
            return True
        return self.op_eq(a.operation, b.operation)

    def op_eq(self, p, q):
        if self.mode == "memoized":
            pair = (id(p), id(q))
            if pair in self._memo:
                return True
        self.op_comparisons += 1
        equal = (p.fingerprint == q.fingerprint and p.name == q.name and len(p.inputs) == len(q.inputs)
                 and all(x is y or self.value_eq(x, y) for x, y in zip(p.inputs, q.inputs)))
        if equal and self.mode == "memoized":
            self._memo.add((id(p), id(q)))
        return equal


class OperationKey:
    """Structural identity of an operation: name, input keys, cached fingerprint."""

    __slots__ = ("name", "inputs", "fingerprint")

    def __init__(self, name, inputs):
        self.name = name
        self.inputs = tuple(inputs)
        self.fingerprint = hash((name, tuple(hash(k) for k in self.inputs)))


class ValueKey:
    """``Input(name)`` (operation None) or ``Derived(operation, slot)``; hash = cached
    fingerprint, equality delegated to the ``KeyModel``."""

    __slots__ = ("model", "name", "operation", "slot", "_hash")

    def __init__(self, model, name=None, operation=None, slot=0):
        self.model = model
        self.name = name
        self.operation = operation
        self.slot = slot
        self._hash = hash(("input", name)) if operation is None else hash((operation.fingerprint, slot))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if not isinstance(other, ValueKey):
            return NotImplemented
        return self.model.value_eq(self, other)

    def __repr__(self):
        if self.operation is None:
            return f"Input({self.name})"
        return f"Derived({self.operation.name}, slot={self.slot})"


class GraphBuilder:
    """Records the value keys of a program in creation order (``values``)."""

    def __init__(self, model):
        self.model = model
        self.values = []

    def input(self, name):
        key = self._intern(("input", name), lambda: ValueKey(self.model, name=name))
        self.values.append(key)
        return key

    def op(self, name, inputs, n_out=1):
        """Add an operation; returns its output key (n_out = 1) or a list of keys."""
        if self.model.mode == "interned":
            ident = (name, tuple(id(k) for k in inputs))
            operation = self._intern(ident, lambda: OperationKey(name, inputs))
            outs = [self._intern((ident, s), lambda s=s: ValueKey(self.model, operation=operation, slot=s))
                    for s in range(n_out)]
        else:
            operation = OperationKey(name, inputs)  # a new Arc, like GraphBuilder::add_op
            outs = [ValueKey(self.model, operation=operation, slot=s) for s in range(n_out)]
        self.values.extend(outs)
        return outs[0] if n_out == 1 else outs

    def _intern(self, ident, make):
        if self.model.mode != "interned":
            return make()
        table = self.model._interned
        if ident not in table:
            table[ident] = make()
        return table[ident]


# --- programs ----------------------------------------------------------------------------

def chain_program(b, layers):
    """The seed's minimal chain: ``layers`` times y <- (y * y) / 2 (every y used twice)."""
    y = b.input("y0")
    two = b.input("2")
    for _ in range(layers):
        y = b.op("div", [b.op("mul", [y, y]), two])
    return y


def trg_step_program(b, t):
    """One TRG-like step on the key level (same data flow as ``trglab.trg.step``):
    normalise (T used by T*T and by T/n), two truncated SVDs of the normalised T whose
    three outputs are all used (sqrt(S) on both halves), and the plaquette contraction.
    T reaches T' along 3 * 8 = 24 paths. Returns (T' key, ln n key)."""
    nrm = b.op("sqrt", [b.op("sum", [b.op("mul", [t, t])])])
    tn = b.op("div", [t, nrm])
    halves = []
    for unfold in ("reshape_ul_dr", "reshape_ld_ru"):
        u, s, vh = b.op("svd", [b.op(unfold, [tn])], n_out=3)
        root = b.op("sqrt", [s])
        halves += [b.op("mul", [u, root]), b.op("mul", [root, vh])]
    f1, f3, f2, f4 = halves
    return b.op("contract", [f3, f2, f1, f4]), b.op("log", [nrm])


def trg_program(b, steps):
    """ln Z / N of ``steps`` TRG-like steps: acc = sum ln n_i / 2^i + ln tr(T_n) / 2^n."""
    t = b.op("site_tensor", [b.input("beta")])
    acc = b.input("0")
    for i in range(steps):
        t, ln = trg_step_program(b, t)
        acc = b.op("add", [acc, b.op("scale", [ln, b.input(f"2^-{i}")])])
    return b.op("add", [acc, b.op("scale", [b.op("trace", [t]), b.input(f"2^-{steps}")])])


PROGRAMS = {"chain": chain_program, "trg": trg_program}


# --- the transform --------------------------------------------------------------------------

@dataclass
class TransformResult:
    program: str
    depth: int
    mode: str
    values: int  # value keys looked up
    op_comparisons: int  # structural OperationKey comparisons during the lookups
    value_eq_calls: int
    seconds: float  # time of the lookups (graph building excluded)


def _program(program):
    if callable(program):
        return getattr(program, "__name__", "program"), program
    if program not in PROGRAMS:
        raise ValueError(f"unknown program {program!r}; choose one of {', '.join(PROGRAMS)}")
    return program, PROGRAMS[program]


def transform(program, depth, mode="naive"):
    """Build ``program`` at ``depth`` twice and look every key of copy B up in a dict of
    copy A's keys (the way a transform re-creating keys would). Returns TransformResult.

    program: "chain", "trg" or a callable (builder, depth) -> key. depth: int >= 1.
    """
    name, fn = _program(program)
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be an int >= 1, got {depth!r}")
    model = KeyModel(mode)
    a = model.builder()
    fn(a, depth)
    table = {}
    for i, key in enumerate(a.values):
        table.setdefault(key, i)
    b = model.builder()
    fn(b, depth)
    model.reset_counters()
    t0 = time.perf_counter()
    for key in b.values:
        if key not in table:
            raise AssertionError(f"key {key!r} of the rebuilt graph not found: the model is broken")
    seconds = time.perf_counter() - t0
    return TransformResult(name, depth, mode, len(b.values), model.op_comparisons, model.value_eq_calls, seconds)


def transform_table(program, depths, modes=MODES, cap_s=None):
    """``transform`` for every depth and mode: a list of dicts (one row per depth) with
    columns depth, values and, per mode, ``<mode>_comparisons`` and ``<mode>_ms``.

    cap_s: once one run of a mode takes longer than cap_s seconds, the deeper depths of
    that mode are not run (their cells are None), like the seed's 1500 ms cap.
    """
    rows = []
    capped = set()
    for d in depths:
        row = {"depth": d}
        for mode in modes:
            if mode in capped:
                row[f"{mode}_comparisons"] = row[f"{mode}_ms"] = None
                continue
            r = transform(program, d, mode)
            row["values"] = r.values
            row[f"{mode}_comparisons"] = r.op_comparisons
            row[f"{mode}_ms"] = r.seconds * 1e3
            if cap_s is not None and r.seconds > cap_s:
                capped.add(mode)
        rows.append(row)
    return rows


def naive_comparisons(program, depth):
    """Predicted structural comparisons of the naive transform, without running it.

    A naive hit between disjoint equal copies of key k costs W(k) = 1 + sum W(inputs)
    (0 for inputs): the number of operation nodes in the DAG unfolded into a tree. The
    transform looks up every value, so the total is the sum of W over all value keys.
    Computed on one copy with W memoized, so it is cheap at any depth.
    """
    _, fn = _program(program)
    model = KeyModel("naive")
    b = model.builder()
    fn(b, depth)
    w = {}
    total = 0
    for key in b.values:  # creation order: inputs before the operations that use them
        op = key.operation
        if op is None:
            continue
        if id(op) not in w:
            w[id(op)] = 1 + sum(w[id(k.operation)] for k in op.inputs if k.operation is not None)
        total += w[id(op)]
    return total
