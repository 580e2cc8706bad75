"""`cir table | contrast | joint | figures` end to end on synthetic paired tables."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from cir.cli import main
from cir.pairs.synthetic import simulate_paired
from cir.stats.effects import EFFECT_COLUMNS


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("run")
    df = simulate_paired(30, conditions=("clean", "stale2"), delays=(0, 4),
                         operations=("refresh", "refresh_ablated"), seed=5)
    df.to_csv(path / "paired.csv", index=False)
    return path


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_table_json_is_a_list_of_groups_with_the_documented_columns(run_dir, capsys):
    code, out, _ = _run(capsys, "table", run_dir, "--format", "json", "--resamples", 200)
    assert code == 0
    records = json.loads(out)
    assert len(records) == 2 * 2 * 2
    for key in ["condition", "delay", "operation", *EFFECT_COLUMNS]:
        assert key in records[0]
    for r in records:
        assert 0 <= r["success_with"] <= 1 and r["ci_low_pp"] <= r["effect_pp"] <= r["ci_high_pp"]


def test_table_csv_and_markdown_agree(run_dir, capsys):
    code, out, _ = _run(capsys, "table", run_dir / "paired.csv", "--by", "condition", "--format", "csv",
                        "--resamples", 200, "--seed", 4, "--operation", "refresh")
    assert code == 0
    csv = pd.read_csv(io.StringIO(out))
    assert list(csv["condition"]) == ["clean", "stale2"]
    code, md, _ = _run(capsys, "table", run_dir, "--by", "condition", "--resamples", 200, "--seed", 4,
                       "--operation", "refresh")
    assert code == 0
    assert md.startswith("| condition")
    assert f"{csv['effect_pp'].iloc[1]:.2f}" in md
    assert "resamples=200" in md and "seed=4" in md and "subset=all" in md


def test_table_reads_parquet_and_writes_to_a_file(run_dir, capsys, tmp_path):
    pytest.importorskip("pyarrow")
    pd.read_csv(run_dir / "paired.csv").to_parquet(tmp_path / "p.parquet")
    out_file = tmp_path / "table.json"
    code, out, _ = _run(capsys, "table", tmp_path / "p.parquet", "--format", "json", "--resamples", 100,
                        "--out", out_file)
    assert code == 0 and out == ""
    assert len(json.loads(out_file.read_text())) == 8


def test_factual_success_subset(run_dir, capsys):
    code, out, _ = _run(capsys, "table", run_dir, "--by", "condition,operation", "--subset", "factual-success",
                        "--format", "json", "--resamples", 100)
    clean = json.loads(out)[0]
    assert code == 0 and clean["condition"] == "clean" and clean["rescues"] == 0
    assert clean["success_without"] == 1.0
    # --cohort, the option's former name, still reads as --subset
    code, former, _ = _run(capsys, "table", run_dir, "--by", "condition,operation", "--cohort", "factual-success",
                           "--format", "json", "--resamples", 100)
    assert code == 0 and former == out


def test_contrast(run_dir, capsys):
    code, out, _ = _run(capsys, "contrast", run_dir, "--a", "stale2", "--b", "clean", "--by", "delay",
                        "--operation", "refresh_ablated", "--format", "json", "--resamples", 200)
    assert code == 0
    rows = json.loads(out)
    assert [r["delay"] for r in rows] == [0, 4]
    for r in rows:
        assert r["difference_pp"] == pytest.approx(r["effect_a_pp"] - r["effect_b_pp"])


def test_joint_formats(run_dir, capsys):
    code, out, _ = _run(capsys, "joint", run_dir, "--condition", "stale2", "--delay", 4,
                        "--format", "json", "--resamples", 200)
    assert code == 0
    (group,) = json.loads(out)
    assert group["condition"] == "stale2" and group["delay"] == 4
    assert sum(sum(row.values()) for row in group["counts"].values()) == group["n_tasks"]
    assert [e["comparison"] for e in group["effects"]] == [
        "refresh vs none", "refresh_ablated vs none", "refresh vs refresh_ablated"]
    code, md, _ = _run(capsys, "joint", run_dir, "--resamples", 100)
    assert code == 0 and md.count("### condition=") == 4 and "refresh: rescue" in md
    code, csv, _ = _run(capsys, "joint", run_dir, "--format", "csv", "--counts", "--resamples", 100)
    assert code == 0 and csv.splitlines()[0] == "condition,delay,a,b,outcome_a,outcome_b,n"


def test_figures_command_writes_and_skips(run_dir, capsys, tmp_path):
    single = pd.read_csv(run_dir / "paired.csv")
    single = single[single["operation"] == "refresh"]
    single.to_csv(tmp_path / "single.csv", index=False)
    code, out, _ = _run(capsys, "figures", tmp_path / "single.csv", "--out", tmp_path / "figs",
                        "--resamples", 100)
    assert code == 0
    assert "joint_outcomes: skipped:" in out
    assert (tmp_path / "figs" / "effects_by_delay.png").exists()
    assert (tmp_path / "figs" / "outcome_partitions.svg").exists()


@pytest.mark.parametrize(
    "argv,message",
    [
        (["table", "{dir}/nope.csv"], "nope.csv: no such file"),
        (["table", "{dir}", "--by", "condition,room"], "grouping key 'room'"),
        (["contrast", "{dir}", "--a", "stale9", "--b", "clean"], "condition 'stale9' is not in the paired table"),
        (["joint", "{dir}", "--a", "refresh", "--b", "rewind"], "operation 'rewind' is not in the paired table"),
        (["table", "{dir}", "--resamples", "0"], "--resamples 0: expected an integer from 1 to 1000000"),
        (["table", "{dir}", "--resamples", "1000000000"], "--resamples 1000000000: expected an integer from 1"),
        (["table", "{dir}", "--by", "condition,delay"],
         "the table holds 2 recovery operations (refresh, refresh_ablated) and the grouping would add"),
        (["contrast", "{dir}", "--a", "stale2", "--b", "clean", "--by", "delay"], "--by delay,operation"),
        (["table", "{dir}", "--operation", "rewind"], "operation 'rewind' is not in the paired table"),
    ],
)
def test_user_errors_are_one_line_without_traceback(run_dir, capsys, argv, message):
    code, out, err = _run(capsys, *[a.format(dir=run_dir) for a in argv])
    assert code == 2 and out == ""
    assert err.startswith("cir: error: ") and message in err
    assert len(err.strip().splitlines()) == 1


def test_bad_table_content_is_reported(tmp_path, capsys):
    df = simulate_paired(4, seed=0)
    df.loc[2, "y1"] = 3
    df.to_csv(tmp_path / "paired.csv", index=False)
    code, _, err = _run(capsys, "table", tmp_path)
    assert code == 2 and "column 'y1' must hold 0/1" in err and "row 2 has" in err and "3" in err


def test_prefix_mismatch_rows_are_dropped_with_a_note(tmp_path, capsys):
    df = simulate_paired(6, seed=0)
    df.loc[0, "prefix_match"] = 0
    df.to_csv(tmp_path / "paired.csv", index=False)
    code, out, err = _run(capsys, "table", tmp_path, "--by", "", "--format", "json", "--resamples", 50)
    assert code == 0 and "1 row(s) with prefix_match false dropped" in err
    assert json.loads(out)[0]["n"] == len(df) - 1
    code, out, _ = _run(capsys, "table", tmp_path, "--by", "", "--format", "json", "--resamples", 50,
                        "--keep-prefix-mismatch")
    assert json.loads(out)[0]["n"] == len(df)


def test_columns_option_selects_result_columns(run_dir, capsys):
    code, out, _ = _run(capsys, "table", run_dir, "--by", "condition,operation", "--columns", "rescues,effect_pp",
                        "--format", "csv", "--resamples", 50)
    assert code == 0 and out.splitlines()[0] == "condition,operation,rescues,effect_pp"
    # markdown: a compact default that fits a terminal; all of them on request
    code, md, _ = _run(capsys, "table", run_dir, "--resamples", 50)
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert code == 0 and max(map(len, table)) <= 140 and "mcnemar_p" not in table[0]  # all: 352 wide
    code, md, _ = _run(capsys, "table", run_dir, "--resamples", 50, "--columns", "all")
    assert all(c in md.splitlines()[0] for c in EFFECT_COLUMNS)
    code, md, _ = _run(capsys, "joint", run_dir, "--resamples", 50, "--columns", "comparison,effect_pp")
    assert code == 0 and "| comparison" in md and "ci_low_pp" not in md
    code, _, err = _run(capsys, "contrast", run_dir, "--a", "stale2", "--b", "clean", "--columns", "bogus")
    assert code == 2 and "--columns: 'bogus' not in the result" in err


def test_figures_joint_options(run_dir, capsys, tmp_path):
    code, _, _ = _run(capsys, "figures", run_dir, "--out", tmp_path, "--resamples", 50,
                      "--a", "refresh_ablated", "--b", "refresh", "--condition", "clean", "--delay", 0)
    assert code == 0 and (tmp_path / "joint_outcomes.svg").exists()
    assert "refresh_ablated (rows) vs refresh (columns)" in (tmp_path / "joint_outcomes.svg").read_text()
    code, _, err = _run(capsys, "figures", run_dir, "--out", tmp_path, "--condition", "stale7")
    assert code == 2 and "condition 'stale7' is not in the paired table" in err
