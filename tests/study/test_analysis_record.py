"""An analysis's record (cir.study.outputs): the same inputs and every output whole is nothing to
do; any change to either is an analysis to do again."""

from __future__ import annotations

from pathlib import Path

from cir.study import outputs


def _analysed(out: Path, digest: str) -> None:
    (out / "tables").mkdir(parents=True)
    (out / "tables" / "a.csv").write_text("x\n1\n")
    (out / "figures").mkdir()
    (out / "figures" / "f.png").write_bytes(b"\x89PNG")
    (out / "report.md").write_text("# r\n")
    (out / "router.json").write_text("{}\n")
    outputs.record(out, digest)


def test_the_same_inputs_and_whole_outputs_are_nothing_to_do(tmp_path: Path) -> None:
    digest = outputs.inputs_digest({"seed": 0}, {"primary": {"paired_sha256": "ab"}})
    _analysed(tmp_path, digest)
    assert outputs.unchanged(tmp_path, digest)
    assert not outputs.unchanged(tmp_path, outputs.inputs_digest({"seed": 1}, {"primary": {"paired_sha256": "ab"}}))
    assert not outputs.unchanged(tmp_path, outputs.inputs_digest({"seed": 0}, {"primary": {"paired_sha256": "ac"}}))
    (tmp_path / "tables" / "a.csv").write_text("x\n2\n")  # an output edited
    assert not outputs.unchanged(tmp_path, digest)


def test_an_output_gone_or_a_record_unreadable_is_an_analysis_to_do(tmp_path: Path) -> None:
    digest = outputs.inputs_digest({}, {})
    _analysed(tmp_path, digest)
    (tmp_path / "figures" / "f.png").unlink()
    assert not outputs.unchanged(tmp_path, digest)
    (tmp_path / outputs.ANALYSIS_JSON).write_text("{not json")
    assert not outputs.unchanged(tmp_path, digest)
    outputs.begin(tmp_path)  # an analysis that starts removes the record: stopped midway, it is done again
    assert not (tmp_path / outputs.ANALYSIS_JSON).exists() and not outputs.unchanged(tmp_path, digest)


def test_the_code_version_sees_the_code(tmp_path: Path) -> None:
    whole, part = outputs.code_version(), outputs.code_version(("router/",), ())
    assert len(whole) == 64 and whole != part
    assert outputs.code_version(("router/",), ()) == part
