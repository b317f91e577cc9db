"""Native models: build the small std-only Rust programs in ``native/`` and run them in
child processes.

``native/drop_chain`` releases a singly linked chain of ``Option<Arc<Node>>`` either with
the default (recursive) drop or with an iterative ``Drop``. A recursive release of a long
chain overflows the main thread's stack and the process aborts with SIGABRT, as tenferro's
checkpoint chain does. Such crashes cannot be caught in-process, so every run is a child
process (the parent plays the seed's parent process and only reports exit statuses).

CPython cannot show this crash by itself: pure-Python recursion keeps its frames on the
heap and recursion through C stops with RecursionError at a fixed depth, hence Rust.

The build goes to ``_build/native/<name>/`` (CARGO_TARGET_DIR), never into ``native/``.
"""

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from .catch import ChildResult
from .paths import repo_root

#: Main-thread stack of every child (RLIMIT_STACK), the Linux and macOS default.
DEFAULT_STACK_BYTES = 8 << 20
#: Chain lengths the page runs: tenferro's recorded lengths after steps 4 and 5, a round
#: 10^5 and 10^6.
DEFAULT_LENGTHS = (14425, 100_000, 346201, 1_000_000)


_THREAD_ID = re.compile(r"(thread '[^']*') \(\d+\)")  # drop the OS thread id from messages


class CargoNotFound(RuntimeError):
    """No cargo on PATH nor in ~/.cargo/bin."""


def find_cargo():
    """Path of cargo (PATH first, then ~/.cargo/bin), or None."""
    found = shutil.which("cargo")
    if found:
        return found
    home = Path.home() / ".cargo" / "bin" / "cargo"
    return str(home) if home.exists() else None


def project_dir(name="drop_chain"):
    return repo_root() / "native" / name


def target_dir(name="drop_chain"):
    return repo_root() / "_build" / "native" / name


def build(name="drop_chain"):
    """``cargo build --release --offline --locked`` of native/<name>; returns the binary path.

    Raises CargoNotFound (one line) without cargo, RuntimeError with cargo's last line when
    the build fails.
    """
    cargo = find_cargo()
    if cargo is None:
        raise CargoNotFound("cargo not found on PATH or in ~/.cargo/bin: install Debian's rustc and cargo")
    manifest = project_dir(name) / "Cargo.toml"
    if not manifest.exists():
        raise FileNotFoundError(f"no Rust project at {manifest.parent}")
    env = dict(os.environ, CARGO_TARGET_DIR=str(target_dir(name)))
    p = subprocess.run([cargo, "build", "--release", "--offline", "--locked", "--quiet",
                        "--manifest-path", str(manifest)], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"cargo build of {name} failed: {last}")
    binary = target_dir(name) / "release" / name
    if not binary.exists():
        raise RuntimeError(f"cargo build of {name} succeeded but {binary} is missing")
    return binary


def _with_stack(argv, stack_bytes):
    """argv run through ``sh -c 'ulimit -s KiB && exec ...'``: the child's main-thread stack
    is set before exec, and the parent (with JAX's threads) never forks Python code."""
    if stack_bytes < (64 << 10) or stack_bytes % 1024:
        raise ValueError(f"stack_bytes must be a multiple of 1024 and >= 64 KiB, got {stack_bytes!r}")
    return ["/bin/sh", "-c", f'ulimit -s {stack_bytes // 1024} && exec "$0" "$@"'] + list(argv)


def run_drop(binary, nodes, iterative=False, stack_bytes=DEFAULT_STACK_BYTES, timeout=60.0):
    """One child: build a chain of ``nodes`` nodes and release it. Never raises for crashes.

    The child's main-thread stack is ``stack_bytes`` (RLIMIT_STACK set before exec; the
    soft limit can only be raised up to the hard limit).
    Returns a ``trglab.catch.ChildResult``.
    """
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 0:
        raise ValueError(f"nodes must be a non-negative int, got {nodes!r}")
    argv = [str(binary), str(nodes)] + (["--iterative"] if iterative else [])
    t0 = time.perf_counter()
    try:
        p = subprocess.run(_with_stack(argv, stack_bytes), capture_output=True, text=True, timeout=timeout)
        return ChildResult(argv, p.returncode, p.stdout, p.stderr, time.perf_counter() - t0)
    except subprocess.TimeoutExpired:
        return ChildResult(argv, None, "", "", time.perf_counter() - t0, timed_out=True)


def _message(result):
    """The child's last meaningful line: the release time or the abort message."""
    err = [_THREAD_ID.sub(r"\1", ln.strip()) for ln in result.stderr.splitlines() if ln.strip()]
    if err:
        return " / ".join(err[-2:])
    out = [ln.strip() for ln in result.stdout.splitlines() if ln.strip()]
    return out[-1] if out else ""


def drop_runs(lengths=DEFAULT_LENGTHS, modes=("recursive", "iterative"),
              stack_bytes=DEFAULT_STACK_BYTES, binary=None, timeout=60.0):
    """The parent process: one child per (length, mode); one row per child.

    Row keys: nodes, drop, exit_status (Rust ``ExitStatus`` style, e.g. "signal: 6
    (SIGABRT)"), shell_exit (what a shell reports: 128 + signal), signal, released (bool),
    message, seconds.
    """
    for m in modes:
        if m not in ("recursive", "iterative"):
            raise ValueError(f"unknown drop mode {m!r}; choose recursive or iterative")
    binary = binary or build("drop_chain")
    rows = []
    for n in lengths:
        for m in modes:
            r = run_drop(binary, n, iterative=(m == "iterative"), stack_bytes=stack_bytes, timeout=timeout)
            rc = r.returncode
            rows.append({
                "nodes": n, "drop": m, "exit_status": r.status,
                "shell_exit": None if rc is None else (128 - rc if rc < 0 else rc),
                "signal": r.signal_name, "released": rc == 0 and "released" in r.stdout,
                "message": _message(r), "seconds": r.seconds,
            })
    return rows


def max_release_depth(binary=None, lo=1_000, hi=1_000_000, stack_bytes=DEFAULT_STACK_BYTES):
    """Longest chain the recursive drop releases on ``stack_bytes`` (bisection over children).

    Returns (longest_ok, shortest_crash); (hi, None) when even ``hi`` nodes release fine.
    """
    binary = binary or build("drop_chain")

    def ok(n):
        return run_drop(binary, n, stack_bytes=stack_bytes).returncode == 0

    if not ok(lo):
        raise RuntimeError(f"even {lo} nodes crash on a {stack_bytes} byte stack")
    if ok(hi):
        return hi, None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo, hi


def toolchain():
    """Versions of the Rust toolchain that builds the native models: {"cargo": ..., "rustc": ...}."""
    cargo = find_cargo()
    if cargo is None:
        raise CargoNotFound("cargo not found on PATH or in ~/.cargo/bin: install Debian's rustc and cargo")
    rustc = shutil.which("rustc") or str(Path(cargo).with_name("rustc"))
    out = {}
    for key, exe in (("cargo", cargo), ("rustc", rustc)):
        p = subprocess.run([exe, "--version"], capture_output=True, text=True)
        out[key] = p.stdout.strip() or p.stderr.strip()
    return out
