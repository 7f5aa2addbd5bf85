"""notebooks/explore_catalog.ipynb runs start to end on the tiny project and shows its figures."""

from __future__ import annotations

import pytest

from tests.pipelines.conftest import PROJECT_ROOT

NOTEBOOK = PROJECT_ROOT / "notebooks" / "explore_catalog.ipynb"
FIGURE_CALLS = (
    "training_curves_figure(",
    "distance_matrix_figure(",
    "heatmap_figure(",
    "group_curves_figure(",
    "penalty_figure(",
    "profile_figure(",
    "mds_figure(",
    "keep_k_figure(",
    "alignment_summary_figure(",
    "stitching_figure(",
)


def _last_line(cell) -> str:
    return cell.source.strip().splitlines()[-1]


def test_the_notebook_runs_on_the_tiny_project_and_shows_figures_as_images(tiny_project, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    project, _ = tiny_project
    for name, value in {
        "KEDRO_ENV": "test",
        "HF_HUB_OFFLINE": "1",
        "KEDRO_DISABLE_TELEMETRY": "1",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }.items():
        monkeypatch.setenv(name, value)  # the kernel inherits the environment
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")  # committed clean
    client = nbclient.NotebookClient(
        notebook,
        timeout=180,
        startup_timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(project)}},
    )
    client.execute()  # raises CellExecutionError on any failing cell

    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    figure_cells = [cell for cell in code if _last_line(cell).startswith(FIGURE_CALLS)]
    assert len(figure_cells) == len(FIGURE_CALLS)
    for cell in figure_cells:
        assert any("image/png" in output.get("data", {}) for output in cell.outputs), _last_line(cell)
    for cell in code:
        for output in cell.outputs:
            data = output.get("data", {})
            shown_as_text = data.get("text/plain", "") if "image/png" not in data else ""
            assert not shown_as_text.startswith("<Figure"), _last_line(cell)
            assert "<Figure size" not in output.get("text", ""), _last_line(cell)
    tables = [cell for cell in code if any("text/html" in o.get("data", {}) for o in cell.outputs)]
    assert len(tables) >= 8  # sentences, zoo summary, index, CKA distances and pair, penalties, MLEM, alignment
    environment = next(cell for cell in code if "context.params" in cell.source)
    assert "environment 'test'" in environment.outputs[0]["text"]
