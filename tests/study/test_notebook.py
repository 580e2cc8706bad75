"""The analysis notebook runs top to bottom against a `cir reproduce --quick` output.

Run by .ci/run after the quick reproduction: `CIR_OUT=DIR pytest -m notebook`
(DIR is the `--out` of `cir reproduce --quick`; the notebook reads the same variable).
"""

import os
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "experiments" / "analysis.ipynb"


@pytest.mark.notebook
def test_analysis_notebook_executes(monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    out = os.environ.get("CIR_OUT")
    if not out or not (Path(out) / "report.md").exists():
        pytest.fail("set CIR_OUT to the output folder of `cir reproduce --quick --out DIR`")
    # the kernel runs in experiments/: a relative CIR_OUT means this folder's, not the kernel's
    monkeypatch.setenv("CIR_OUT", str(Path(out).resolve()))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    # every figure cell shows its figure as a PNG (cir.study.figures builds Figures without pyplot)
    figure_cells = [c for c in nb.cells if c.cell_type == "code" and "plot_" in c.source and "fig =" in c.source]
    pngs = [sum("image/png" in o.get("data", {}) for o in c.get("outputs", [])) for c in figure_cells]
    assert len(figure_cells) == 3 and pngs == [1, 1, 1], pngs
    # the router cell printed at least one decision
    router_out = "".join(o.get("text", "") for c in nb.cells if "router.decide" in c.source
                         for o in c.get("outputs", []))
    assert "delay" in router_out and "Decision(" in router_out
