"""Expected failures on a page: print them, don't die.

A notebook cell tagged ``raises-exception`` still fails a papermill run, so pages catch
expected errors through ``show_exception`` and run crashes in child processes through
``run_child``.
"""

import signal
import subprocess
import time
from dataclasses import dataclass


def show_exception(fn, *args, **kwargs):
    """Call fn; if it raises, print ``ExcType: message`` (one line) and return the exception.

    Returns None (and prints nothing) when fn does not raise.
    """
    try:
        fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the point is to show any exception
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"{type(exc).__name__}: {first}")
        return exc
    return None


@dataclass
class ChildResult:
    """Outcome of a child process: exit status, signal, output, wall time."""

    argv: list
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False

    @property
    def signal_name(self):
        """'SIGABRT' etc. when the child was killed by a signal, else ''."""
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return ""

    @property
    def status(self):
        """Human-readable status in the style of Rust's ExitStatus Display."""
        if self.timed_out:
            return "timed out"
        if self.signal_name:
            return f"signal: {-self.returncode} ({self.signal_name})"
        return f"exit status: {self.returncode}"


def run_child(argv, timeout=60.0, env=None, cwd=None):
    """Run argv in a child process; never raises for crashes or time-outs."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
        return ChildResult(list(argv), p.returncode, p.stdout, p.stderr, time.perf_counter() - t0)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return ChildResult(list(argv), None, out, err, time.perf_counter() - t0, timed_out=True)
