"""The analysis notebook runs top to bottom against a `cir reproduce --quick` output.

Run by .ci/run after the quick reproduction: `pytest -m notebook --quick-dir DIR`.
"""

from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "experiments" / "analysis.ipynb"


@pytest.mark.notebook
def test_analysis_notebook_executes(quick_dir, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    if quick_dir is None:
        pytest.fail("pass --quick-dir DIR (the output of `cir reproduce --quick --out DIR`)")
    monkeypatch.setenv("CIR_OUT", str(Path(quick_dir).resolve()))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    # the router cell printed at least one decision
    router_out = "".join(o.get("text", "") for c in nb.cells if "router.decide" in c.source
                         for o in c.get("outputs", []))
    assert "delay" in router_out
