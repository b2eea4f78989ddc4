"""The notebooks (notebooks/*.ipynb) run top to bottom at their small sizes
(FJ_NOTEBOOK_QUICK=1), in a kernel of this Python, with no cell failing."""

from __future__ import annotations

import os
import pathlib

import pytest

import fusionjit

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (the bench extra)")
nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (the bench extra)")
pytest.importorskip("ipykernel", reason="ipykernel is not installed (the bench extra)")

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 4


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.setenv("FJ_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("FJ_NOTEBOOK_OUT", str(tmp_path))   # figures go here, not the checkout
    # The kernel imports what this process imports: the same fusionjit, benchmarks from ROOT.
    paths = [str(ROOT), str(pathlib.Path(fusionjit.__file__).resolve().parent.parent)]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    nb = nbformat.read(str(path), as_version=4)
    client = nbclient.NotebookClient(nb, timeout=240, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()   # raises CellExecutionError, with the cell and its traceback
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
