import json
import math
import os
import threading

import pytest

from trglab import records


def test_write_merges_figures_of_one_page(tmp_path):
    records.write_figure("p", "a", 1.5, tmp_path)
    records.write_figure("p", "b", [1, 2, 3], tmp_path)
    records.write_figure("p", "a", 2.5, tmp_path)  # last write wins
    records.write_figure("q", "s", "text", tmp_path)
    assert records.read_results(tmp_path) == {"p": {"a": 2.5, "b": [1, 2, 3]}, "q": {"s": "text"}}
    assert json.loads((tmp_path / "p.json").read_text())["page"] == "p"
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_env_var_chooses_the_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("TRGLAB_RESULTS_DIR", str(tmp_path / "r"))
    path = records.write_figure("page", "x", 3)
    assert path == tmp_path / "r" / "page.json"
    assert records.read_results()["page"] == {"x": 3}


def test_default_folder_is_under_build_never_data(monkeypatch):
    monkeypatch.delenv("TRGLAB_RESULTS_DIR", raising=False)
    d = records.results_dir()
    assert d.parts[-2:] == ("_build", "results-local") and "data" not in d.parts[-2:]


def test_nan_and_tuples_round_trip(tmp_path):
    records.write_figure("p", "g", [1.0, float("nan")], tmp_path)
    records.write_figure("p", "t", (1, 2), tmp_path)
    got = records.read_results(tmp_path)["p"]
    assert got["g"][0] == 1.0 and math.isnan(got["g"][1]) and got["t"] == [1, 2]


@pytest.mark.parametrize("bad", [object(), {"a": 1}, [1, {2}], b"bytes", 1j])
def test_non_json_values_are_refused_with_one_line(tmp_path, bad):
    with pytest.raises(records.RecordError) as info:
        records.write_figure("p", "x", bad, tmp_path)
    assert "\n" not in str(info.value) and "must be float, int, str, bool" in str(info.value)
    assert not (tmp_path / "p.json").exists()


def test_numpy_scalars_are_refused_with_a_hint(tmp_path):
    np = pytest.importorskip("numpy")
    with pytest.raises(records.RecordError, match="tolist"):
        records.write_figure("p", "x", np.float32(1.0), tmp_path)


@pytest.mark.parametrize("page,name", [("", "x"), ("a/b", "x"), ("p", ""), ("p", 3)])
def test_bad_ids_are_refused(tmp_path, page, name):
    with pytest.raises(records.RecordError):
        records.write_figure(page, name, 1, tmp_path)


def test_concurrent_writers_never_leave_a_broken_file(tmp_path):
    def writer(k):
        for i in range(30):
            records.write_figure("p", f"w{k}", i, tmp_path)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    doc = json.loads((tmp_path / "p.json").read_text())  # always valid JSON
    assert doc["page"] == "p" and all(v == 29 for v in doc["figures"].values())


def test_broken_results_file_is_a_clear_error(tmp_path):
    (tmp_path / "p.json").write_text("{not json")
    with pytest.raises(records.RecordError, match="p.json: not valid JSON"):
        records.read_results(tmp_path)
