"""Source notebooks are committed clean: no outputs, exactly one `parameters` cell."""

import json
from pathlib import Path

import pytest

CHAPTERS = Path(__file__).resolve().parents[1] / "chapters"
NOTEBOOKS = sorted(CHAPTERS.rglob("*.ipynb"))


def problems(path: Path) -> list[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    out = []
    code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    for i, cell in enumerate(code, 1):
        if cell.get("outputs"):
            out.append(f"code cell {i} has outputs (clear them: jupyter nbconvert --clear-output --inplace {path.name})")
        if cell.get("execution_count") is not None:
            out.append(f"code cell {i} has an execution count")
    n_params = sum("parameters" in c.get("metadata", {}).get("tags", []) for c in nb.get("cells", []))
    if n_params != 1:
        out.append(f"{n_params} cells tagged 'parameters' (need exactly 1)")
    if any("injected-parameters" in c.get("metadata", {}).get("tags", []) for c in nb.get("cells", [])):
        out.append("has an injected-parameters cell (an executed copy, not a source)")
    if "papermill" in nb.get("metadata", {}):
        out.append("has papermill metadata (an executed copy, not a source)")
    return out


def test_there_are_pages():
    assert NOTEBOOKS, f"no notebooks under {CHAPTERS}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(CHAPTERS)) for p in NOTEBOOKS])
def test_notebook_is_clean(path):
    assert problems(path) == []


def test_the_check_catches_a_dirty_notebook(tmp_path):
    dirty = {"cells": [{"cell_type": "code", "metadata": {}, "source": "1", "execution_count": 1,
                        "outputs": [{"output_type": "execute_result", "data": {"text/plain": "1"}}]}],
             "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "dirty.ipynb"
    path.write_text(json.dumps(dirty))
    found = problems(path)
    assert any("has outputs" in p for p in found) and any("0 cells tagged" in p for p in found)
