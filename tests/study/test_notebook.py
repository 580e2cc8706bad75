"""The analysis notebook runs top to bottom against a `cir reproduce --quick` output, by the
command the README gives (`jupyter nbconvert --to html --execute`, from the `notebook` extra).

Run by .ci/run after the quick reproduction: `CIR_OUT=DIR pytest -m notebook`
(DIR is the `--out` of `cir reproduce --quick`; the notebook reads the same variable).
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "experiments" / "analysis.ipynb"


def _readme_command() -> str:
    """The README's command that executes the notebook (CIR_OUT=... jupyter nbconvert ...)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^(CIR_OUT=\S+ jupyter nbconvert [^\n]*analysis\.ipynb[^\n]*)$", readme, re.M)
    assert found, "the README gives no `jupyter nbconvert --execute` command for the notebook"
    assert 'pip install -e ".[notebook]"' in readme
    return found.group(1)


def test_the_readme_runs_the_notebook_with_an_extra_that_has_nbconvert():
    notebook = re.search(r"^notebook = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert notebook and '"nbconvert' in notebook.group(1)  # the extra the README installs
    command = _readme_command()
    assert "--execute" in command and "--to html" in command


@pytest.mark.notebook
def test_analysis_notebook_executes(tmp_path):
    out = os.environ.get("CIR_OUT")
    if not out or not (Path(out) / "report.md").exists():
        pytest.fail("set CIR_OUT to the output folder of `cir reproduce --quick --out DIR`")
    jupyter = shutil.which("jupyter", path=str(Path(sys.executable).parent)) or shutil.which("jupyter")
    assert jupyter, 'jupyter is not installed: pip install -e ".[notebook]"'
    words = _readme_command().split()[2:]  # the README's, without CIR_OUT= and jupyter
    words[words.index("--output-dir") + 1] = str(tmp_path)  # written where the test looks
    argv = [jupyter, *words]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "CIR_OUT": str(Path(out).resolve())})
    assert done.returncode == 0, done.stderr[-3000:]
    page = (tmp_path / "analysis.html").read_text(encoding="utf-8")
    # every figure cell shows its figure (cir.study.figures builds Figures without pyplot)
    assert page.count("data:image/png;base64,") >= 3
    # the router cell printed at least one decision
    assert "Decision(" in page and "delay" in page
