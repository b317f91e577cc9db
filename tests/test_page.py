import json

import pytest

from trglab.page import Page, ParameterError, validate_parameter, versions


@pytest.mark.parametrize(
    "name,value",
    [("beta", -0.3), ("beta", "0.3"), ("beta", float("nan")), ("chi", 1), ("chi", 16.0), ("steps", 0),
     ("steps", True), ("steps_list", []), ("steps_list", [1, 0]), ("chi_list", [8, 1]), ("cap_s", 0),
     ("h", -1e-5), ("ks", [2, "4"])],
)
def test_bad_parameters_raise_one_line(name, value):
    with pytest.raises(ParameterError) as e:
        validate_parameter(name, value)
    assert "\n" not in str(e.value) and name in str(e.value)


def test_schedule_longer_than_steps():
    with pytest.raises(ParameterError, match="4 entries but steps = 3"):
        Page("x", show=False, steps=3, ks=[2, 4, 4, 16])


def test_record_writes_results_and_glues(tmp_path, monkeypatch):
    monkeypatch.setenv("TRGLAB_RESULTS_DIR", str(tmp_path))
    page = Page("demo_page", show=False, beta=0.3)
    page.record("g", 0.123456789, fmt=".3f")
    page.record("counts", [1, 25, 601])
    data = json.loads((tmp_path / "demo_page.json").read_text())
    figures = data.get("figures", data)
    assert figures["g"] == 0.123456789 and figures["counts"] == [1, 25, 601]


def test_versions_reports_x64():
    v = versions()
    assert v["x64"] is True and v["JAX"] == "0.12.0.1"
