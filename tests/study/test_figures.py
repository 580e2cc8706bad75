"""Figures: each is a DataFrame -> Figure function; write_figures saves PNG+SVG or skips with a reason."""

from __future__ import annotations

import json

import pytest
from matplotlib.figure import Figure

from cir.pairs.synthetic import simulate_paired
from cir.study.figures import (
    FigureSkipped,
    plot_effects,
    plot_joint,
    plot_mechanisms,
    plot_partitions,
    write_figures,
)


@pytest.fixture(scope="module")
def multi():
    return simulate_paired(40, conditions=("clean", "stale2"), delays=(0, 1, 4),
                           operations=("refresh", "refresh_ablated", "replan"), seed=3)


@pytest.fixture(scope="module")
def single():
    return simulate_paired(30, conditions=("clean", "stale2"), delays=(0, 4), seed=4)


def _suptitle(fig: Figure) -> str:
    # Figure.get_suptitle() needs matplotlib 3.8; the declared floor is 3.7
    return fig._suptitle.get_text() if fig._suptitle is not None else ""


def _texts(fig: Figure) -> str:
    parts = [_suptitle(fig)]
    for ax in fig.axes:
        parts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
    return " | ".join(parts)


def test_effects_figure_says_what_is_shown(multi):
    fig = plot_effects(multi, resamples=200)
    text = _texts(fig)
    assert isinstance(fig, Figure)
    assert "Effect of recovery" in text and "cluster-bootstrap" in text and "40 tasks" in text
    assert "recovery delay" in text and "pp" in text
    assert sum(ax.get_visible() for ax in fig.axes) == 3  # one panel per operation


def test_mechanism_figure_has_a_panel_per_condition(multi):
    fig = plot_mechanisms(multi, resamples=200)
    assert "Mechanism controls" in _suptitle(fig)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == ["condition: clean", "condition: stale2"]
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["refresh", "refresh_ablated", "replan"]


def test_partition_bars_add_up_to_n(multi):
    fig = plot_partitions(multi, subset="factual-success")
    assert "factual-success subset" in _suptitle(fig)
    ax = fig.axes[0]
    widths = {}
    for patch in ax.patches:
        y = round(patch.get_y(), 6)
        widths[y] = widths.get(y, 0) + patch.get_width()
    n = multi[multi["factual_success"] == 1]["task_id"].nunique()
    assert set(widths.values()) == {n}


def test_joint_heatmap_defaults_to_refresh_vs_ablated_at_stale2(multi):
    fig = plot_joint(multi)
    assert "refresh (rows) vs refresh_ablated (columns)" in _suptitle(fig)
    assert "condition stale2, delay 4" in _suptitle(fig)


def test_figures_needing_two_operations_are_skipped_not_crashed(single, tmp_path):
    with pytest.raises(FigureSkipped, match="two operations"):
        plot_joint(single)
    with pytest.raises(FigureSkipped, match="at least two operations"):
        plot_mechanisms(single, resamples=50)
    result = write_figures(single, tmp_path, resamples=100)
    assert result["joint_outcomes"].startswith("skipped:")
    assert result["mechanism_controls"].startswith("skipped:")
    assert (tmp_path / "effects_by_delay.png").stat().st_size > 10_000
    assert (tmp_path / "outcome_partitions.svg").exists()
    manifest = json.loads((tmp_path / "figures.json").read_text())
    assert manifest["settings"]["resamples"] == 100
    assert manifest["figures"]["effects_by_delay"] == ["effects_by_delay.png", "effects_by_delay.svg"]


def test_svg_output_is_byte_identical_for_identical_input(multi):
    import io

    import matplotlib

    outputs = []
    for _ in range(2):
        buffer = io.BytesIO()
        with matplotlib.rc_context({"svg.hashsalt": "cir"}):
            plot_joint(multi).savefig(buffer, format="svg", metadata={"Date": None})
        outputs.append(buffer.getvalue())
    assert outputs[0] == outputs[1]


@pytest.mark.slow
def test_written_figures_are_reproducible(multi, tmp_path):
    write_figures(multi, tmp_path / "a", resamples=100)
    write_figures(multi, tmp_path / "b", resamples=100)
    for name in ["effects_by_delay", "mechanism_controls", "outcome_partitions", "joint_outcomes"]:
        assert (tmp_path / "a" / f"{name}.svg").read_bytes() == (tmp_path / "b" / f"{name}.svg").read_bytes()
        assert (tmp_path / "a" / f"{name}.png").read_bytes() == (tmp_path / "b" / f"{name}.png").read_bytes()


def test_figures_stay_legible_at_page_width(single):
    """No figure wider than MAX_WIDTH inches (the report scales it to the text width); a
    single panel is wide enough for its two-line title; the heatmap's colour bar counts."""
    from cir.study.figures import MAX_WIDTH, MIN_WIDTH

    wide = simulate_paired(24, conditions=("clean", "stale1", "stale2", "missing"), delays=(0, 1, 2, 4),
                           operations=("refresh", "refresh_ablated", "replan", "rewind", "placebo"), seed=5)
    for fig in (plot_mechanisms(wide, resamples=50), plot_partitions(wide), plot_effects(wide, resamples=50)):
        assert fig.get_figwidth() <= MAX_WIDTH
    one = plot_effects(single, resamples=50)
    assert MIN_WIDTH <= one.get_figwidth() <= MAX_WIDTH
    one.canvas.draw()  # the title inside the figure, on both sides
    box = one._suptitle.get_window_extent()
    assert box.x0 >= 0 and box.x1 <= one.bbox.width
    heat = plot_joint(wide, "refresh", "refresh_ablated", condition="stale2", delay=4)
    heat.canvas.draw()
    ticks = heat.axes[-1].get_yticks()
    assert len(ticks) and all(float(t).is_integer() for t in ticks)
