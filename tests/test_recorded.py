import json

import pytest

from trglab import recorded


def test_load_parses_numbers_and_requires_provenance(tmp_path, monkeypatch):
    monkeypatch.setenv("TRGLAB_ROOT", str(tmp_path))
    d = tmp_path / "data" / "tenferro"
    d.mkdir(parents=True)
    (d / "t.csv").write_text("# comment\nn,ms,note\n1,4.36,ok\n2,5.27,\n")
    with pytest.raises(FileNotFoundError, match="provenance"):
        recorded.load("t")
    meta = {k: "x" for k in recorded.PROVENANCE_KEYS}
    (d / "t.meta.json").write_text(json.dumps(meta))
    r = recorded.load("t")
    assert r.rows == [{"n": 1, "ms": 4.36, "note": "ok"}, {"n": 2, "ms": 5.27, "note": None}]
    assert "记录数据" in r.html() and "tenferro-rs x" in r.provenance()
    with pytest.raises(FileNotFoundError):
        recorded.load("missing")


def test_every_recorded_table_in_data_loads():
    from trglab.paths import data_dir

    for csv in sorted((data_dir() / "tenferro").glob("*.csv")):
        r = recorded.load(csv.stem)
        assert r.rows, csv
