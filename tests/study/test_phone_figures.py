"""Figures drawn for a phone (cir.study.figures.for_phone) and the page that carries them beside the wide ones."""

from __future__ import annotations

from matplotlib.figure import Figure

from cir.pairs.synthetic import simulate_paired
from cir.study.figures import (
    PHONE_WIDTH,
    axis_text_points,
    for_phone,
    plot_effects,
    plot_partitions,
)
from cir.study.page import PHONE_BREAK_PX, Report, save_figure


def test_a_figure_for_a_phone_stacks_its_panels_and_keeps_its_text_large():
    fig = plot_partitions(simulate_paired(30, seed=2).assign(operation="refresh").pipe(
        lambda df: df.drop_duplicates(["task_id", "condition", "delay"])))
    small = axis_text_points(fig)
    for_phone(fig)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert fig.get_figwidth() == PHONE_WIDTH
    assert len({round(ax.get_position().x0, 3) for ax in shown}) == 1  # one column
    assert axis_text_points(fig) >= small  # no text made smaller


def test_several_panels_go_one_under_another():
    fig = Figure(figsize=(11, 4), layout="constrained")
    axes = fig.subplots(1, 3, sharey=True)
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="a line")
        ax.set_xlabel("a long axis label that a phone's width cannot hold on one line at all")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=3)
    for_phone(fig)
    fig.canvas.draw()
    tops = sorted(round(ax.get_position().y0, 3) for ax in axes)
    assert len(set(tops)) == 3 and "\n" in axes[0].get_xlabel()
    assert all(t.get_visible() and t.get_text() for t in axes[2].get_yticklabels()[1:2])  # its own y ticks


def test_the_page_shows_the_phone_drawing_below_the_break_and_says_how_large_its_text_is(tmp_path):
    saved = save_figure(plot_effects(simulate_paired(20, seed=1), resamples=50), tmp_path, "effects")
    assert saved.path.is_file() and saved.phone.startswith(b"\x89PNG")
    assert saved.phone_width_px == round(PHONE_WIDTH * 300) and saved.phone_text_px > saved.text_px
    report = Report("t")
    report.figure(saved, "effects")
    page, md = report.html(tmp_path), report.markdown(tmp_path)
    assert f"<source media='(max-width: {PHONE_BREAK_PX}px)'" in page
    assert f"data-text-px='{saved.text_px}'" in page and f"data-phone-text-px='{saved.phone_text_px}'" in page
    assert "![effects](effects.png)" in md  # the Markdown links the wide file, as before
    assert "<meta name='viewport' content='width=device-width, initial-scale=1'>" in page
