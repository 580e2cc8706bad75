"""Router: JSON round trip, live decision == offline decision, refusal of bad files."""

from __future__ import annotations

import json
import pickle
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cir.episode.transcript import Step, Transcript
from cir.families.alfworld.features import extract_features
from cir.pairs.paired import read_paired
from cir.pairs.synthetic import simulate
from cir.router.evaluation import decide_rows
from cir.router.policy import CIRPolicy
from cir.router.runtime import FORMAT_VERSION, Decision, Router
from cir.util.deprecation import CirDeprecationWarning
from cir.util.errors import CirError

TASK = ("You are in the middle of a room. Looking quickly around you, you see a cabinet 1, "
        "a countertop 1, a desk 1, and a shelf 1.\nYour task is to: put a mug in shelf.")
PLACES = ["cabinet 1", "countertop 1", "desk 1", "shelf 1"]


@pytest.fixture(scope="module")
def policy() -> CIRPolicy:
    return CIRPolicy(threshold_steps=11).fit(simulate(120, seed=5))


@pytest.fixture(scope="module")
def router(policy: CIRPolicy) -> Router:
    return policy.to_router(task_ids=["syn0000"])


@pytest.fixture()
def router_file(router: Router, tmp_path: Path) -> Path:
    return router.save(tmp_path / "router.json")


def random_transcript(rng: np.random.Generator, n: int, at: int, condition: str) -> Transcript:
    """A made-up episode of n env actions whose env action ``at`` is perturbed."""
    steps: list[Step] = []
    truths: list[str] = []
    holding = False
    for i in range(1, n + 1):
        if rng.random() < 0.15:
            steps.append(Step("agent", "think: keep searching", None, None, "OK."))
        r = rng.random()
        if r < 0.5:
            place = PLACES[rng.integers(len(PLACES))]
            action, obs = f"go to {place}", f"You arrive at {place}. On the {place}, you see a mug 1."
        elif r < 0.7 and not holding:
            action, obs = "take mug 1 from desk 1", "You pick up the mug 1 from the desk 1."
            holding = True
        elif r < 0.8 and holding:
            action, obs = "move mug 1 to shelf 1", "You move the mug 1 to the shelf 1."
            holding = False
        else:
            action, obs = "open cabinet 1", "Nothing happens."
        shown = obs
        if i == at and condition == "stale2" and len(truths) >= 2:
            shown = truths[-2]
        elif i == at and condition == "missing":
            shown = "[Observation unavailable.]"
        truths.append(obs)
        steps.append(Step("agent", action, action, obs, shown,
                          events=[f"perturb:{condition}"] if i == at else []))
    return Transcript("t", TASK, steps)


def test_round_trip_is_exact(router: Router, router_file: Path) -> None:
    loaded = Router.load(router_file)
    assert loaded.to_dict() == router.to_dict()
    assert json.loads(router_file.read_text())["format_version"] == FORMAT_VERSION
    # saving the loaded router gives the same bytes
    again = loaded.save(router_file.with_name("again.json"))
    assert again.read_text() == router_file.read_text()
    assert loaded.delays == (1, 2, 4)


def test_live_decision_equals_offline_decision(policy: CIRPolicy, router_file: Path, tmp_path: Path) -> None:
    """Features of transcripts -> a paired table (CSV round trip) -> the offline policy's
    decision; the router on the same transcripts decides the same, with equal scores."""
    router = Router.load(router_file)
    rng = np.random.default_rng(0)
    records, live = [], []
    for k in range(60):
        condition = ["clean", "stale2", "missing"][k % 3]
        n = int(rng.integers(6, 14))
        at = int(rng.integers(3, n - 1))
        full = random_transcript(rng, n, at, condition)
        for d in (0, 1, 2, 4):
            if at + d > n:
                continue
            prefix = full.prefix(full.steps_until_env_action(at + d))
            live.append(router.decide(prefix, d))
            records.append({"task_id": f"t{k}", "condition": condition, "delay": d, "operation": "refresh",
                            "y0": 0, "y1": 0, "executed": 1, "factual_success": 0, "prefix_match": 1,
                            **extract_features(prefix, d)})
    pd.DataFrame(records).to_csv(tmp_path / "paired.csv", index=False)
    table = read_paired(tmp_path / "paired.csv")
    offline = policy.decide(table)
    assert [d.recover for d in live] == offline["recover"].tolist()
    assert [d.blocked_by for d in live] == offline["blocked_by"].tolist()
    assert [d.p_err for d in live] == offline["p_err"].tolist()
    assert [d.utility for d in live] == offline["utility"].tolist()
    blockers = {d.blocked_by for d in live}
    assert len(blockers) >= 2  # the comparison covers more than one branch of the rule


def test_decision_fields_and_rules(router: Router) -> None:
    rng = np.random.default_rng(3)
    t = random_transcript(rng, 8, 4, "stale2")
    d = router.decide(t, 4)
    assert isinstance(d, Decision) and d.delay == 4
    assert 0 <= d.p_err <= 1 and 0 <= d.p0 <= 1 and 0 <= d.p1 <= 1
    assert d.utility == pytest.approx((1 - d.p0) * d.p1 - 2.0 * d.p0 * (1 - d.p1))
    assert router.decide(t, 3).blocked_by == "delay"  # not a candidate delay
    assert router.decide(t, 0).blocked_by == "delay"  # below d_min
    recovered = Transcript(t.task_id, t.task_text,
                           [*t.steps, Step("harness", "refresh", "look", "x", "You are facing the desk 1.")])
    assert router.decide(recovered, 1).recover is False
    assert router.decide(recovered, 1).blocked_by == "already_recovered"


def test_true_observation_does_not_change_the_decision(router: Router) -> None:
    t = random_transcript(np.random.default_rng(9), 10, 5, "stale2")
    other = Transcript(t.task_id, t.task_text,
                       [replace(s, observation="hidden truth", events=[]) for s in t.steps])
    assert router.decide(t, 2) == router.decide(other, 2)


def test_router_reproduces_offline_decisions(policy: CIRPolicy, router: Router) -> None:
    table = simulate(30, seed=11)
    a = policy.decide(table)
    b = decide_rows(router, table)
    pd.testing.assert_frame_equal(a, b)


# -- bad files ---------------------------------------------------------------------------------
def _write(tmp_path: Path, data: object, raw: str | None = None) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(raw if raw is not None else json.dumps(data))
    return path


def _data(router_file: Path) -> dict:
    return json.loads(router_file.read_text())


def test_truncated_file(router_file: Path, tmp_path: Path) -> None:
    text = router_file.read_text()
    with pytest.raises(CirError, match="not valid JSON"):
        Router.load(_write(tmp_path, None, text[: len(text) // 2]))
    with pytest.raises(CirError, match="not valid JSON"):
        Router.load(_write(tmp_path, None, ""))


def test_pickle_is_refused_without_running_it(tmp_path: Path) -> None:
    path = tmp_path / "router.json"
    path.write_bytes(pickle.dumps({"format": "cir-router"}))
    with pytest.raises(CirError, match="router"):
        Router.load(path)


def test_missing_and_extra_keys(router_file: Path, tmp_path: Path) -> None:
    data = _data(router_file)
    del data["thresholds"]["beta"]
    with pytest.raises(CirError, match="missing key 'thresholds.beta'"):
        Router.load(_write(tmp_path, data))
    data = _data(router_file)
    data["exec"] = "import os"
    with pytest.raises(CirError, match="unexpected key 'exec'"):
        Router.load(_write(tmp_path, data))
    data = _data(router_file)
    data["models"]["p0"]["bias"] = 1.0
    with pytest.raises(CirError, match="unexpected key 'models.p0.bias'"):
        Router.load(_write(tmp_path, data))
    data = _data(router_file)
    del data["models"]["p1[refresh]"]
    with pytest.raises(CirError, match=r"missing model 'p1\[refresh\]'"):
        Router.load(_write(tmp_path, data))


def test_wrong_types(router_file: Path, tmp_path: Path) -> None:
    cases = [
        (("models", "p_err", "intercept"), "0.5", "must be int or float"),
        (("params", "d_min"), True, "must be int"),
        (("params", "delays"), "1,2,4", "must be list"),
        (("thresholds", "alpha"), [0.5], "must be int or float or null"),
        (("features",), {"f_delay": 1}, "must be list"),
    ]
    for keys, value, message in cases:
        data = _data(router_file)
        node = data
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
        with pytest.raises(CirError, match=message):
            Router.load(_write(tmp_path, data))
    data = _data(router_file)
    data["models"]["p0"]["coef"] = data["models"]["p0"]["coef"][:-1]
    with pytest.raises(CirError, match="one per feature"):
        Router.load(_write(tmp_path, data))
    data = _data(router_file)
    data["models"]["p0"]["scaler_scale"][0] = 0.0
    with pytest.raises(CirError, match="positive"):
        Router.load(_write(tmp_path, data))
    with pytest.raises(CirError, match="must be a JSON object"):
        Router.load(_write(tmp_path, [1, 2, 3]))
    raw = router_file.read_text().replace('"intercept": ', '"intercept": NaN, "x": ', 1)
    with pytest.raises(CirError, match="NaN is not allowed"):
        Router.load(_write(tmp_path, None, raw))


def test_future_version_and_foreign_format(router_file: Path, tmp_path: Path) -> None:
    data = _data(router_file)
    data["format_version"] = FORMAT_VERSION + 1
    with pytest.raises(CirError, match="newer than this cir reads"):
        Router.load(_write(tmp_path, data))
    data["format_version"] = FORMAT_VERSION
    data["format"] = "something-else"
    with pytest.raises(CirError, match="not a cir router file"):
        Router.load(_write(tmp_path, data))


def test_unknown_feature(router_file: Path, tmp_path: Path) -> None:
    data = _data(router_file)
    data["features"][0] = "f_from_the_future"
    with pytest.raises(CirError, match="unknown feature 'f_from_the_future'"):
        Router.load(_write(tmp_path, data))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CirError, match="no such router file"):
        Router.load(tmp_path / "nope.json")


@pytest.mark.parametrize("estimator", ["paper", "paired"])
def test_live_equals_offline_with_every_feature(tmp_path: Path, estimator: str) -> None:
    """A router over all of FEATURES (as from a real run): batch and single-row scores agree
    bit for bit, so decisions agree too, for both estimators."""
    rng = np.random.default_rng(4)
    records, prefixes = [], []
    for k in range(40):
        condition = ["clean", "stale2", "stale1", "missing"][k % 4]
        n = int(rng.integers(7, 14))
        at = int(rng.integers(3, n - 2))
        full = random_transcript(rng, n, at, condition)
        y0 = int(rng.random() < (0.8 if condition == "clean" else 0.4))
        for d in (1, 2, 4):
            if at + d > n:
                continue
            prefix = full.prefix(full.steps_until_env_action(at + d))
            f = extract_features(prefix, d)
            y1 = int(rng.random() < 0.3 + 0.4 * f["f_suspect_mismatch"])
            prefixes.append((prefix, d))
            records.append({"task_id": f"t{k // 4}", "condition": condition, "delay": d, "operation": "refresh",
                            "y0": y0, "y1": y1, "executed": 1, "factual_success": 1, "prefix_match": 1, **f})
    pd.DataFrame(records).to_csv(tmp_path / "paired.csv", index=False)
    table = read_paired(tmp_path / "paired.csv")
    policy = CIRPolicy(estimator=estimator, threshold_steps=7, epsilon=0.2).fit(table)
    assert len(policy.features_) == len(extract_features(prefixes[0][0], 1))
    router = Router.load(policy.to_router().save(tmp_path / "router.json"))
    assert router.estimator.name == estimator
    offline = policy.decide(table)
    live = [router.decide(p, d) for p, d in prefixes]
    scores = ("p0", "p1", "p_fail") if estimator == "paper" else ("p_rescue", "p_harm")
    for name in ("p_err", "utility", *scores):
        assert [getattr(d, name) for d in live] == offline[name].tolist(), name
    assert [d.recover for d in live] == offline["recover"].tolist()
    assert [d.blocked_by for d in live] == offline["blocked_by"].tolist()
    assert [d.operation for d in live] == offline["operation"].tolist()
    if estimator == "paper":  # (this made-up table gives the paired estimator nothing to gain)
        assert any(d.recover for d in live) and not all(d.recover for d in live)


def test_transcript_from_messages_is_the_inverse_of_context():
    """A chat harness's message list gives the transcript (and features) the harness ran."""
    from cir.episode.protocol import ABLATED_TEXT, REFRESH_PREFIX

    rng = np.random.default_rng(3)
    t = random_transcript(rng, 9, 4, "stale2")
    t.steps.append(Step("harness", "refresh", "look", "You arrive at desk 1.",
                        f"{REFRESH_PREFIX} You arrive at desk 1.", ["recovery:refresh"]))
    t.steps.append(Step("agent", "go to shelf 1", "go to shelf 1", None, "You arrive at shelf 1."))
    back = Transcript.from_messages(t.task_id, [{"role": "system", "content": "be brief"}, *t.context()])
    assert [(s.actor, s.reply, s.action, s.shown) for s in back.steps] == \
        [(s.actor, s.reply, s.action, s.shown) for s in t.steps]
    assert back.context() == t.context()
    for d in (0, 1, 3):
        assert extract_features(back, d) == extract_features(t, d)
    ablated = Transcript.from_messages("x", [*t.context(), {"role": "user", "content": ABLATED_TEXT}],
                                       refresh_query="read")
    assert (ablated.steps[-1].reply, ablated.steps[-1].action) == ("refresh_ablated", "read")
    with pytest.raises(CirError, match=r"messages\[1\]: an assistant reply without"):
        Transcript.from_messages("x", [{"role": "user", "content": TASK}, {"role": "assistant", "content": "a"},
                                       {"role": "assistant", "content": "b"}])
    with pytest.raises(CirError, match="role 'robot'"):
        Transcript.from_messages("x", [{"role": "user", "content": TASK}, {"role": "robot", "content": "a"}])


def _as_version_3(data: dict) -> dict:
    """A version 4 file as cir wrote it before (format version 3: the words ``settings``,
    ``grid_size`` and the budget's ``settings_*``)."""
    params = {("grid_size" if k == "threshold_steps" else k): v for k, v in data["params"].items()}
    budget = {k.replace("candidates_", "settings_"): v for k, v in data["budget"].items()}
    return {**{k: v for k, v in data.items() if k != "params"}, "format_version": 3, "settings": params,
            "budget": budget}


def _as_version_2(data: dict) -> dict:
    """A version 4 file of the paper's estimator as cir wrote it before (format version 2)."""
    data = _as_version_3(data)
    settings = {k: v for k, v in data["settings"].items() if k not in ("delta", "Cs")}
    models = data["models"]
    baselines = {k: {f: v for f, v in b.items() if f != "operation"} for k, b in data["baselines"].items()}
    return {**{k: v for k, v in data.items() if k not in ("estimator", "operations", "budget")},
            "format_version": 2, "settings": {**settings, "operation": data["operations"][0]}, "baselines": baselines,
            "models": {"p_err": models["p_err"], "p0": models["p0"], "p1": models["p1[refresh]"]}}


def test_router_files_of_format_versions_1_2_and_3_still_load(router: Router, tmp_path: Path):
    data = router.to_dict()
    assert data["format_version"] == FORMAT_VERSION == 4 and data["extractor"] == "alfworld"
    assert "settings" not in data and data["params"]["threshold_steps"] == router.params["threshold_steps"]
    (tmp_path / "v3.json").write_text(json.dumps(_as_version_3(data)))
    with pytest.warns(CirDeprecationWarning, match=r"router file format 3 is deprecated .* in .*v3\.json"):
        v3 = Router.load(tmp_path / "v3.json")
    assert v3.to_dict() == data  # the same router in the words of version 4
    v2 = _as_version_2(data)
    (tmp_path / "v2.json").write_text(json.dumps(v2))
    with pytest.warns(CirDeprecationWarning, match="router file format 2 is deprecated"):
        loaded = Router.load(tmp_path / "v2.json")
    assert loaded.estimator.name == "paper" and loaded.operations == ("refresh",)
    assert {k: m.to_dict() for k, m in loaded.models.items()} == data["models"]
    old = {k: v for k, v in v2.items() if k != "extractor"} | {"format_version": 1}
    (tmp_path / "v1.json").write_text(json.dumps(old))
    with pytest.warns(CirDeprecationWarning, match="router file format 1 is deprecated"):
        assert Router.load(tmp_path / "v1.json").extractor.name == "alfworld"
    with pytest.raises(CirError, match="unexpected key 'extractor'"):
        Router.from_dict({**v2, "format_version": 1})  # (its warning said once already, above)


def test_a_decision_reads_its_scores_as_attributes_and_logs_as_plain_data(router: Router) -> None:
    rng = np.random.default_rng(1)
    t = random_transcript(rng, 10, 5, "stale2")
    d = router.decide(t.prefix(t.steps_until_env_action(6)), 1)
    assert d.p0 == d.scores["p0"] and d.s_R == d.scores["s_R"]
    assert d.p_rescue is None and d.p_harm is None  # the paired estimator's scores: absent, not an error
    log = d.as_dict()
    assert log["delay"] == 1 and log["operation"] == d.operation and log["utility[refresh]"] == d.utility
    json.dumps(log)  # plain data


def test_a_paired_router_round_trips_and_refuses_the_other_estimators_models(tmp_path: Path) -> None:
    policy = CIRPolicy(estimator="paired", threshold_steps=7).fit(simulate(80, seed=6))
    path = policy.to_router().save(tmp_path / "paired.json")
    data = json.loads(path.read_text())
    assert data["estimator"] == "paired" and set(data["models"]) == {"p_err", "p_rescue[refresh]", "p_harm[refresh]"}
    assert set(data["thresholds"]) == {"alpha", "gamma"} and data["budget"]["kind"] == "empirical"
    assert Router.load(path).to_dict() == data
    data["models"]["p0"] = data["models"]["p_err"]
    with pytest.raises(CirError, match="unexpected model 'p0'"):
        Router.load(_write(tmp_path, data))
    data = json.loads(path.read_text())
    data["estimator"] = "oracle"
    with pytest.raises(CirError, match="unknown estimator 'oracle'"):
        Router.load(_write(tmp_path, data))
    data = json.loads(path.read_text())
    data["operations"] = ["teleport"]
    with pytest.raises(CirError, match="unknown operation 'teleport'"):
        Router.load(_write(tmp_path, data))


# -- a router that never recovers, and one Decision for every router kind ----------------------------

ROOT = Path(__file__).resolve().parents[2]
#: Every router file a study writes (the committed reference study's first replicate).
STUDY_ROUTERS = ROOT / "data" / "replicates" / "seed-0"
ROUTER_FILES = ("router.json", "router_paired.json", "router_paired_replan.json", "router_paired_rewind.json",
                "router_multi.json")
NEVER = "never recovers: no threshold gained within the budget on the fitting table (alpha is null)"


def _readme_router_example() -> str:
    """The README's Python example of the router in one's own harness, as printed there."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("from cir import Router, Step, Transcript")
    return text[start:text.index("```", start)]


@pytest.mark.parametrize("name", ROUTER_FILES)
def test_the_readme_example_runs_with_every_router_file_a_study_writes(name: str, capsys) -> None:
    code = _readme_router_example()
    assert '"cir-out/router.json"' in code
    exec(compile(code.replace('"cir-out/router.json"', repr(str(STUDY_ROUTERS / name))), "README.md", "exec"), {})
    recover, operation, p_err, p0, p1, blocked_by = capsys.readouterr().out.split()
    paper = Router.load(STUDY_ROUTERS / name).estimator.name == "paper"
    assert recover in ("True", "False") and float(p_err) >= 0
    assert (p0 != "None", p1 != "None") == (paper, paper)  # the paired estimator has no p0, p1: None


def test_a_decision_has_the_same_fields_for_every_router_kind() -> None:
    t = Transcript.from_messages("t", [{"role": "user", "content": TASK}, {"role": "assistant", "content": "go to desk 1"},
                                       {"role": "user", "content": "You arrive at desk 1. On the desk 1, you see a mug 1."}])
    logs = [Router.load(STUDY_ROUTERS / name).decide(t, 1) for name in ROUTER_FILES]
    # one log line's keys for every kind, but each operation's utility (utility[refresh], ...)
    assert len({tuple(k for k in d.as_dict() if not k.startswith("utility[")) for d in logs}) == 1
    for d in logs:
        for name in ("p_err", "utility", "p0", "p1", "p_fail", "s_R", "s_H", "p_rescue", "p_harm"):
            value = getattr(d, name)
            assert value == d.scores.get(name), (name, value)  # a score the estimator lacks is None


def _never(router_file: Path, tmp_path: Path) -> Path:
    data = json.loads(router_file.read_text())
    data["thresholds"]["alpha"] = None  # what a fit that found nothing to gain writes
    return _write(tmp_path, data)


def test_a_router_without_a_threshold_says_so_when_loaded_and_in_every_decision(router_file: Path, tmp_path: Path,
                                                                                caplog) -> None:
    import logging

    path = _never(router_file, tmp_path)
    with caplog.at_level(logging.WARNING, logger="cir"):
        never = Router.load(path)
    assert f"{path}: this router {NEVER}" in caplog.text
    assert never.never_recovers == NEVER and Router.load(router_file).never_recovers is None
    rng = np.random.default_rng(4)
    decisions = []
    for _ in range(20):
        t = random_transcript(rng, 10, 5, "stale2")
        for delay in (0, 1, 2, 4):
            decisions.append(never.decide(t.prefix(t.steps_until_env_action(5 + delay)), delay))
    assert all(not d.recover and d.operation is None and d.blocked_by == "no_threshold" for d in decisions)
    assert max(d.p_err for d in decisions) > 0.5  # a score high enough is not what blocks it
    # the offline rule says the same
    offline = decide_rows(never, simulate(30, seed=2))
    assert set(offline["blocked_by"]) == {"no_threshold"}


def test_a_fit_that_finds_nothing_to_gain_says_the_router_never_recovers(tmp_path: Path, caplog, capsys) -> None:
    import logging

    from cir.cli import main
    from cir.router.evaluation import evaluate

    flat = simulate(80, seed=7)
    flat["y1"] = flat["y0"]  # recovery changes nothing: no threshold can gain
    flat["outcome"] = np.where(flat["y0"] == 1, "stable_success", "stable_failure")
    with caplog.at_level(logging.WARNING, logger="cir"):
        policy = CIRPolicy(threshold_steps=7).fit(flat)
    assert policy.never_recovers == NEVER and f"the fitted router {NEVER}" in caplog.text
    result = evaluate({"cir": policy.to_router()}, simulate(40, seed=8), resamples=50)
    assert result["settings"]["routers"]["cir"]["never_recovers"] == NEVER
    flat.to_csv(tmp_path / "flat.csv", index=False)
    simulate(40, seed=8).to_csv(tmp_path / "test.csv", index=False)
    capsys.readouterr()
    assert main(["fit", str(tmp_path / "flat.csv"), "--out", str(tmp_path / "never.json"),
                 "--threshold-steps", "7"]) == 0
    assert f"note: the router {NEVER}" in capsys.readouterr().out
    assert main(["evaluate", str(tmp_path / "never.json"), str(tmp_path / "test.csv"), "--resamples", "50",
                 "--allow-overlap"]) == 0
    assert "cir: paper estimator, refresh, alpha=null beta=" in (out := capsys.readouterr().out) and NEVER in out
