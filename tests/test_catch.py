import sys

from trglab.catch import run_child, show_exception


def test_show_exception_prints_one_line(capsys):
    def boom():
        raise ValueError("bad beta\nsecond line")

    exc = show_exception(boom)
    assert isinstance(exc, ValueError)
    assert capsys.readouterr().out == "ValueError: bad beta\n"
    assert show_exception(lambda: None) is None


def test_run_child_reports_signal():
    r = run_child([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGABRT)"], timeout=30)
    assert r.returncode == -6 and r.signal_name == "SIGABRT" and "SIGABRT" in r.status


def test_run_child_timeout():
    r = run_child([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.5)
    assert r.timed_out and r.returncode is None and r.status == "timed out"
