import subprocess

import pytest

from trglab import native

pytestmark = pytest.mark.skipif(native.find_cargo() is None,
                                reason="cargo not found on PATH or in ~/.cargo/bin: the native drop model cannot be built")


@pytest.fixture(scope="module")
def binary():
    return native.build("drop_chain")


def test_build_goes_to_build_dir_not_source_tree(binary):
    assert binary.exists() and "_build" in binary.parts
    assert not (native.project_dir("drop_chain") / "target").exists()


@pytest.mark.parametrize("nodes", [14425, 100_000])
def test_recursive_drop_releases_short_chains(binary, nodes):
    r = native.run_drop(binary, nodes)
    assert r.returncode == 0 and "released in" in r.stdout


@pytest.mark.parametrize("nodes", [346201, 1_000_000])
def test_recursive_drop_of_long_chain_aborts(binary, nodes):
    r = native.run_drop(binary, nodes)
    assert r.signal_name == "SIGABRT"
    assert "has overflowed its stack" in r.stderr
    assert "released in" not in r.stdout


def test_iterative_drop_survives(binary):
    r = native.run_drop(binary, 1_000_000, iterative=True)
    assert r.returncode == 0 and "released in" in r.stdout


def test_bigger_stack_moves_the_limit(binary):
    r = native.run_drop(binary, 346201, stack_bytes=64 << 20)
    assert r.returncode == 0


def test_bad_argument_is_one_clear_error(binary):
    p = subprocess.run([str(binary), "many"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.startswith("error: NODES must be")
    with pytest.raises(ValueError):
        native.run_drop(binary, -1)


def test_drop_runs_table(binary):
    rows = native.drop_runs([1000, 346201], binary=binary)
    status = {(r["nodes"], r["drop"]): r for r in rows}
    assert status[(1000, "recursive")]["exit_status"] == "exit status: 0"
    crash = status[(346201, "recursive")]
    assert crash["exit_status"] == "signal: 6 (SIGABRT)" and crash["shell_exit"] == 134
    assert crash["message"] == "thread 'main' has overflowed its stack / fatal runtime error: stack overflow, aborting"
    assert status[(346201, "iterative")]["released"]


def test_missing_cargo_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(native, "find_cargo", lambda: None)
    with pytest.raises(native.CargoNotFound, match="cargo not found"):
        native.build("drop_chain")
