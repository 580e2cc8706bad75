"""User code of earlier releases, run end to end (tests/compat/README.md lists each piece).

The Python pieces run in the default suite; the commands (subprocesses, a minute or two) are
marked ``compat``, which ``.ci/run`` runs.

Each piece is kept as its users wrote it from that release's documents. Each must run, say each
former name it uses once (one ``cir: deprecated:`` line on the command line, one
``CirDeprecationWarning`` in Python), and give the same table as the same work written with
today's names.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

from cir.util.deprecation import FORMER, CirDeprecationWarning

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
OLD_FILE = "tests/compat/keydoor_0_1.py:FAMILY"  # the guide's `--env path/to/keydoor.py:FAMILY`
OLD_MODULE = "tests.compat.keydoor_0_1:FAMILY"  # and its `--env keydoor:FAMILY`
NEW = "tests.support.keydoor:FAMILY"
GRID = ["--conditions", "clean,stale1,missing", "--delays", "0,1,2", "--operations", "refresh,replan"]
SETTINGS = "Agent.settings()"


def cir(*argv: str) -> subprocess.CompletedProcess:
    """A ``cir`` command as a user types it, from the repository's folder."""
    return subprocess.run([sys.executable, "-m", "cir", *map(str, argv)], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)


def said(stderr: str) -> list[str]:
    """The former names a command's ``cir: deprecated:`` lines name, in order."""
    return [line[len("cir: deprecated: "):].split(" is deprecated since ")[0]
            for line in stderr.splitlines() if line.startswith("cir: deprecated: ")]


def same_text(old: str, new: str, *renames: tuple[str, str]) -> None:
    for a, b in renames:
        old = old.replace(a, b)
    assert old == new


# -- the guide's key-and-door family and agent, through every command --------------------------
#: (label, the command as 0.1's guide wrote it, the same with today's names, former names it uses)
FLOW = [
    ("check-env", ["check-env", "--env", OLD_FILE, "--tasks", "{tasks}/train"],
     ["check-env", "--family", NEW, "--tasks", "{tasks}/train"], ["--env", SETTINGS]),
    ("run --jobs 2 (FILE.py:ATTR)", ["run", "--env", OLD_FILE, "--tasks", "{tasks}/train", "--out", "{w}/train",
                                     "--jobs", "2", "--quiet", *GRID],
     ["run", "--family", NEW, "--tasks", "{tasks}/train", "--out", "{w}/train", "--jobs", "2", "--quiet", *GRID],
     ["--env", SETTINGS]),
    ("run --jobs 1 (MODULE:ATTR)", ["run", "--env", OLD_MODULE, "--tasks", "{tasks}/test", "--out", "{w}/test",
                                    "--jobs", "1", "--quiet", *GRID],
     ["run", "--family", NEW, "--tasks", "{tasks}/test", "--out", "{w}/test", "--jobs", "1", "--quiet", *GRID],
     ["--env", SETTINGS]),
    ("estimate", ["estimate", "--env", OLD_FILE, "--tasks", "{tasks}/test", "--agent", "openai:m", *GRID],
     ["estimate", "--family", NEW, "--tasks", "{tasks}/test", "--agent", "openai:m", *GRID], ["--env", SETTINGS]),
    ("table --cohort", ["table", "{w}/train", "--cohort", "factual-success", "--resamples", "200"],
     ["table", "{w}/train", "--subset", "factual-success", "--resamples", "200"], ["--cohort"]),
    ("fit --grid-size", ["fit", "{w}/train", "--out", "{w}/router.json", "--delays", "1,2", "--grid-size", "11"],
     ["fit", "{w}/train", "--out", "{w}/router.json", "--candidate-delays", "1,2", "--threshold-steps", "11"],
     ["--delays", "--grid-size"]),
    ("evaluate", ["evaluate", "{w}/router.json", "{w}/test", "--resamples", "200"],
     ["evaluate", "{w}/router.json", "{w}/test", "--resamples", "200"], []),
    ("explain", ["explain", "{w}/train"], ["explain", "{w}/train"], []),
    ("episode --router", ["episode", "--env", OLD_FILE, "--tasks", "{tasks}/test", "keydoor-test-000",
                          "--router", "{w}/router.json", "--condition", "stale1"],
     ["episode", "--family", NEW, "--tasks", "{tasks}/test", "keydoor-test-000", "--router", "{w}/router.json",
      "--condition", "stale1"], ["--env", SETTINGS]),
]


@pytest.fixture(scope="module")
def guide(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Every command of the flow, as 0.1's guide wrote it and as today's names write it."""
    root = tmp_path_factory.mktemp("guide")
    tasks = root / "kd-tasks"
    for split, n in (("train", 6), ("test", 4)):
        made = cir("tasks", "generate", "--env", OLD_FILE, "--split", split, "--n", n, "--out", tasks, "--quiet")
        assert made.returncode == 0, made.stderr
    out: dict = {"tasks": tasks, "root": root}
    for style in ("old", "new"):
        work = root / style
        work.mkdir()
        for label, old, new, _ in FLOW:
            argv = [a.replace("{tasks}", str(tasks)).replace("{w}", str(work)) for a in (old if style == "old" else new)]
            out[style, label] = cir(*argv)
    return out


@pytest.mark.compat
@pytest.mark.parametrize("label", [f[0] for f in FLOW])
def test_the_guides_keydoor_of_0_1_runs_each_command_warns_once_and_gives_todays_output(guide: dict, label: str):
    former = next(f[3] for f in FLOW if f[0] == label)
    old, new = guide["old", label], guide["new", label]
    assert old.returncode == 0 and new.returncode == 0, old.stderr[-2000:] + new.stderr[-2000:]
    assert "Traceback" not in old.stderr
    assert said(old.stderr) == former  # each former name it uses, once; no other
    assert said(new.stderr) == []
    for line in old.stderr.splitlines():
        if line.startswith("cir: deprecated: "):
            name = said(line)[0]
            assert f"removed in cir {FORMER[name].removed_in}: use {FORMER[name].new}" in line
    same_text(old.stdout, new.stdout, (str(guide["root"] / "old"), str(guide["root"] / "new")))


@pytest.mark.compat
def test_the_runs_and_routers_of_the_0_1_family_are_todays(guide: dict) -> None:
    old, new = guide["root"] / "old", guide["root"] / "new"
    for run in ("train", "test"):
        before, today = (pd.read_csv(w / run / "paired.csv") for w in (old, new))
        # the shown column is the family's own rule (Family.anomalous, new in 0.2): 0.1's family has
        # none, so only a missing text is anomalous there; today's key-and-door also names its
        # "Nothing happens." anomalous. Every other column is the same, byte for byte
        pd.testing.assert_frame_equal(before.drop(columns="shown"), today.drop(columns="shown"), check_exact=True)
        moved = before["shown"] != today["shown"]
        assert (today.loc[moved, "shown"] == "anomalous").all() and (before.loc[moved, "shown"] != "anomalous").all()
    routers = [json.loads((w / "router.json").read_text()) for w in (old, new)]
    for r in routers:
        r.pop("family")  # each names the family file it was fitted with
    assert routers[0] == routers[1]


@pytest.mark.compat
def test_the_0_1_family_generates_todays_tasks(guide: dict, tmp_path: Path) -> None:
    made = cir("tasks", "generate", "--family", NEW, "--split", "test", "--n", "4", "--out", tmp_path, "--quiet")
    assert made.returncode == 0, made.stderr
    old = {p.relative_to(guide["tasks"] / "test"): p.read_bytes() for p in (guide["tasks"] / "test").rglob("*") if p.is_file()}
    new = {p.relative_to(tmp_path / "test"): p.read_bytes() for p in (tmp_path / "test").rglob("*") if p.is_file()}
    assert old == new


# -- a study's experiment configs with `env =` -------------------------------------------------------
@pytest.mark.compat
def test_experiment_configs_of_0_1_read_as_todays(tmp_path: Path) -> None:
    new = tmp_path / "experiments"
    new.mkdir()
    for config in (HERE / "experiments_0_1").glob("*.toml"):
        text = config.read_text().replace('env = "tests.compat.keydoor_0_1:FAMILY"', f'family = "{NEW}"')
        (new / config.name).write_text(text)
    old = cir("estimate", "--study", "--quick", "--env", OLD_MODULE, "--experiments", HERE / "experiments_0_1",
              "--agent", "openai:m", "--work", tmp_path / "old-work")
    now = cir("estimate", "--study", "--quick", "--experiments", new, "--agent", "openai:m", "--family", NEW,
              "--work", tmp_path / "new-work")
    assert old.returncode == 0 and now.returncode == 0, old.stderr[-2000:] + now.stderr[-2000:]
    assert sorted(said(old.stderr)) == sorted(["--env", "an experiment config's env key", SETTINGS])
    assert said(now.stderr) == []
    same_text(old.stdout, now.stdout, (str(tmp_path / "old-work"), str(tmp_path / "new-work")))


# -- router files of every format ----------------------------------------------------------------
@pytest.fixture(scope="module")
def heldout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 tasks of the committed reference study's held-out cohort (ALFWorld's features)."""
    df = pd.read_csv(ROOT / "data" / "replicates" / "seed-0" / "runs" / "cir_eval" / "paired.csv")
    keep = sorted(df["task_id"].unique())[:30]
    path = tmp_path_factory.mktemp("heldout") / "paired.csv"
    df[df["task_id"].isin(keep)].to_csv(path, index=False)
    return path


@pytest.mark.compat
@pytest.mark.parametrize("version", [1, 2, 3])
def test_a_router_file_of_each_earlier_format_loads_warns_once_and_evaluates_as_format_4(
        version: int, heldout: Path, tmp_path: Path) -> None:
    from cir import Router

    old = HERE / "routers" / f"format{version}.json"
    with pytest.warns(CirDeprecationWarning, match=f"router file format {version} is deprecated"):
        router = Router.load(old)
    rewritten = router.save(tmp_path / "format4.json")
    assert json.loads(rewritten.read_text())["format_version"] == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error", CirDeprecationWarning)
        Router.load(rewritten)  # today's format: nothing to say
    before = cir("evaluate", old, heldout, "--resamples", "200")
    after = cir("evaluate", rewritten, heldout, "--resamples", "200")
    assert before.returncode == 0 and after.returncode == 0, before.stderr[-2000:]
    assert said(before.stderr) == [f"router file format {version}"] and said(after.stderr) == []
    assert before.stdout == after.stdout


# -- Python code of 0.1 -------------------------------------------------------------------------
def _warned(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message).split(" is deprecated since ")[0] for w in record
            if issubclass(w.category, CirDeprecationWarning)]


@pytest.fixture(scope="module")
def keydoor_tasks(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from support.keydoor import FAMILY, generate_tasks

    folder = tmp_path_factory.mktemp("kd")
    generate_tasks(folder, "train", 8, 0)
    generate_tasks(folder, "test", 6, 0)
    return {split: FAMILY.load_tasks(folder / split) for split in ("train", "test")}


def test_the_guides_python_study_of_0_1_gives_todays_tables(keydoor_tasks: dict) -> None:
    from compat.keydoor_0_1 import FAMILY as OLD
    from compat.python_0_1 import guide_study
    from support.keydoor import FAMILY as NEW_FAMILY

    from cir import CIRPolicy, ReplaySettings, evaluate, run_task_pairs, validate_paired
    from cir.stats import effect_table

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        old = guide_study(OLD, keydoor_tasks["train"], keydoor_tasks["test"])
    assert sorted(_warned(record)) == sorted([SETTINGS, "CIRPolicy(grid_size=)", "CIRPolicy.grid_", "Router.settings"])

    settings = ReplaySettings(conditions=("clean", "stale1", "missing"), delays=(0, 1, 2),
                              operations=("refresh",), perturb_fraction=0.5)

    def table(tasks: list) -> pd.DataFrame:
        return validate_paired(pd.DataFrame([row for task in tasks for row in run_task_pairs(
            task, NEW_FAMILY.builtin_agent(), NEW_FAMILY.make_env(task), settings, extractor=NEW_FAMILY.extractor).rows]))

    paired, test_paired = table(keydoor_tasks["train"]), table(keydoor_tasks["test"])
    pd.testing.assert_frame_equal(old["paired"], paired)
    pd.testing.assert_frame_equal(old["effects"], effect_table(paired, by=["operation", "condition", "delay"],
                                                               resamples=200, seed=0))
    policy = CIRPolicy(extractor=NEW_FAMILY.extractor, delays=(1, 2), threshold_steps=11).fit(paired)
    router = policy.to_router(family="keydoor:FAMILY")
    assert old["router"].to_dict() == router.to_dict()
    pd.testing.assert_frame_equal(old["searched"], policy.candidates_)
    pd.testing.assert_frame_equal(old["summary"], evaluate(router, test_paired, resamples=200, seed=0)["summary"])
    assert old["d_min"] == router.params["d_min"]


def test_notebook_tables_of_the_factual_success_cohort_are_todays_subset(keydoor_tasks: dict) -> None:
    from compat.python_0_1 import notebook_tables
    from support.keydoor import FAMILY

    from cir import ReplaySettings, contrast_table, effect_table, run_task_pairs, validate_paired
    from cir.stats import select_subset

    settings = ReplaySettings(conditions=("clean", "stale1"), delays=(0, 1), operations=("refresh",),
                              perturb_fraction=0.5)
    df = validate_paired(pd.DataFrame([row for task in keydoor_tasks["train"] for row in run_task_pairs(
        task, FAMILY.builtin_agent(), FAMILY.make_env(task), settings, extractor=FAMILY.extractor).rows]))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        old = notebook_tables(df)
    assert sorted(_warned(record)) == ["cir.stats.select_cohort()", "cohort="]  # cohort= of two functions: once
    pd.testing.assert_frame_equal(old["effects"], effect_table(df, by=["condition", "delay"], subset="factual-success",
                                                               resamples=200, seed=0))
    pd.testing.assert_frame_equal(old["contrast"], contrast_table(df, "stale1", "clean", by=["delay"],
                                                                  subset="factual-success", resamples=200, seed=0))
    pd.testing.assert_frame_equal(old["rows"], select_subset(df, "factual-success"))


def test_harness_run_of_0_1_plays_the_episode_play_plays(keydoor_tasks: dict) -> None:
    from compat.keydoor_0_1 import FAMILY as OLD
    from compat.python_0_1 import play_on
    from support.keydoor import FAMILY

    from cir import Harness

    task = keydoor_tasks["test"][0]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        prefix, whole = play_on(OLD.builtin_agent(), OLD.make_env(task), str(task.task_id), until=2)
    assert sorted(_warned(record)) == [SETTINGS, "Harness.run()"]
    assert any(w.filename.endswith("python_0_1.py") for w in record if "Harness.run()" in str(w.message))  # the user's line
    harness = Harness(FAMILY.builtin_agent())
    env = FAMILY.make_env(task)
    transcript = harness.reset(env, str(task.task_id))
    harness.play(env, transcript, until_env_actions=2)
    assert transcript.steps == prefix.steps
    assert harness.play(env, transcript).steps == whole.steps


def test_a_chat_harness_reading_decision_refresh_recovers_as_one_reading_recover(keydoor_tasks: dict) -> None:
    from compat.python_0_1 import chat_harness
    from support.keydoor import FAMILY

    from cir import (
        REFRESH_PREFIX,
        CIRPolicy,
        ReplaySettings,
        Transcript,
        run_task_pairs,
        validate_paired,
    )
    from cir.router.runtime import Decision

    settings = ReplaySettings(conditions=("clean", "stale1", "missing"), delays=(0, 1, 2), operations=("refresh",),
                              perturb_fraction=0.5)
    paired = validate_paired(pd.DataFrame([row for task in keydoor_tasks["train"] for row in run_task_pairs(
        task, FAMILY.builtin_agent(), FAMILY.make_env(task), settings, extractor=FAMILY.extractor).rows]))
    router = CIRPolicy(extractor=FAMILY.extractor, delays=(1, 2)).fit(paired).to_router()
    router.thresholds = {name: -10.0 for name in router.thresholds}  # recovers wherever its delays allow
    def chat_harness_now(env, task_id, agent, suspect_move):  # the same harness in today's words
        messages, log = [{"role": "user", "content": env.reset()}], []
        for move in range(12):
            reply = agent.act(messages)
            messages.append({"role": "assistant", "content": reply})
            answer, done, _ = env.step(reply)
            messages.append({"role": "user", "content": answer})
            if done:
                break
            if move >= suspect_move:
                decision = router.decide(Transcript.from_messages(task_id, messages, refresh_query=env.refresh_query),
                                         delay=move - suspect_move)
                refresh = decision.recover and decision.operation == "refresh"
                log.append({"move": move, "delay": decision.delay, "refresh": refresh,
                            "p_err": round(decision.p_err, 6), "blocked_by": decision.blocked_by})
                if refresh:
                    answer, done, _ = env.step(env.refresh_query)
                    messages.append({"role": "user", "content": f"{REFRESH_PREFIX} {answer}"})
        return log

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        old = [chat_harness(router, FAMILY.make_env(t), str(t.task_id), FAMILY.builtin_agent(), 1)
               for t in keydoor_tasks["test"]]
    assert _warned(record) == ["Decision.refresh"]  # once, for every decision of every task
    now = [chat_harness_now(FAMILY.make_env(t), str(t.task_id), FAMILY.builtin_agent(), 1) for t in keydoor_tasks["test"]]
    assert old == now and any(e["refresh"] for log in old for e in log)  # the router does refresh on some
    assert Decision(True, "replan", 0.9, 0.1, None).refresh is False  # a replan is no refresh
    assert Decision(False, None, 0.1, -0.1, "p_err").refresh is False


# -- the counter example of 0.1 -------------------------------------------------------------------
def test_the_counter_example_of_0_1_gives_todays_tables(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from compat import counter_0_1

        from examples import counter
    finally:
        sys.path.remove(str(ROOT))
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        old = counter_0_1.main(tmp_path / "old", resamples=200)
    assert _warned(record) == [SETTINGS]
    new = counter.main(tmp_path / "new", resamples=200)
    for key in ("train", "test", "effects", "summary"):
        pd.testing.assert_frame_equal(old[key], new[key])
    assert old["log"] == new["log"] and old["won"] == new["won"]
    assert (tmp_path / "old" / "paired.csv").read_bytes() == (tmp_path / "new" / "paired.csv").read_bytes()


# -- the framework examples of 0.1, as their docstrings said to run them --------------------------
FRAMEWORK_EXAMPLES = [("langgraph", "langgraph_agent"), ("openai-agents", "openai_agents_agent"),
                      ("inspect", "inspect_agent")]


@pytest.mark.compat
@pytest.mark.parametrize(("kind", "example"), FRAMEWORK_EXAMPLES, ids=[k for k, _ in FRAMEWORK_EXAMPLES])
def test_a_framework_example_of_0_1_runs_as_its_docstring_said(kind: str, example: str, tmp_path: Path) -> None:
    from support.fake_openai import FakeOpenAI
    from support.keydoor import generate_tasks
    from support.toy_framework import keydoor_answer

    from cir.adapters.frameworks import FRAMEWORKS, missing_framework

    if missing_framework(kind):
        pytest.skip(f"needs {', '.join(missing_framework(kind))}: pip install -e '.[{FRAMEWORKS[kind][1]}]'")
    generate_tasks(tmp_path, "test", 3, 0)
    grid = ["--conditions", "clean,stale2,missing", "--delays", "0,2", "--operations", "refresh,replan",
            "--max-turns", "30", "--max-actions", "30", "--quiet"]
    with FakeOpenAI(answer=keydoor_answer) as server:
        old = cir("run", "--env", NEW, "--tasks", tmp_path / "test", "--out", tmp_path / "old",
                  "--agent", f"{kind}:tests/compat/frameworks/{example}_0_1.py:agent", "--base-url", server.base_url, *grid)
        now = cir("run", "--family", NEW, "--tasks", tmp_path / "test", "--out", tmp_path / "now",
                  "--agent", f"{kind}:examples.{example}:agent", "--base-url", server.base_url, *grid)
    assert old.returncode == 0 and now.returncode == 0, old.stderr[-2000:] + now.stderr[-2000:]
    assert said(old.stderr) == ["--env"] and said(now.stderr) == []
    tables = [pd.read_csv(tmp_path / run / "paired.csv").drop(columns="agent") for run in ("old", "now")]
    pd.testing.assert_frame_equal(*tables)  # the agent column digests the example's file, which differs


# -- every former name no piece above uses -----------------------------------------------------------
def _once(name: str, call):
    """``call()``'s value; it must warn exactly once, naming the former ``name``."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        value = call()
    assert _warned(record) == [name], (name, [str(w.message) for w in record])
    return value


def test_every_former_name_still_works(tmp_path: Path) -> None:
    from support.keydoor import FAMILY, KeyDoorAgent

    import cir.agents.factory as factory
    import cir.agents.sampling as sampling
    from cir.adapters.driver import FrameworkAgent
    from cir.families.textworld_cooking.family import FAMILY as COOKING
    from cir.pairs.record import RunRecord
    from cir.pairs.run import run_experiment
    from cir.pairs.settings import ReplaySettings, RunSettings
    from cir.router.runtime import Router
    from cir.stats import decompose as decompose_module  # noqa: F401 - the module, for its former COHORTS
    from cir.study.experiments import Experiment, load_experiments

    # the factory's former functions
    agent = _once("cir.agents.factory.make_agent()", lambda: factory.make_agent("builtin", builtin=FAMILY.builtin_agent))
    assert agent.params() == factory.agent_from_spec("builtin", builtin=FAMILY.builtin_agent).params()
    identity = _once("cir.agents.factory.agent_identity()",
                     lambda: factory.agent_identity("builtin", builtin=FAMILY.builtin_agent))
    assert identity == factory.identity_from_spec("builtin", builtin=FAMILY.builtin_agent)
    assert _once("cir.agents.sampling.sampling_settings()", lambda: sampling.sampling_settings(0.7, 2)) == \
        sampling.sampling_params(0.7, 2)
    cook = COOKING.builtin_agent("default", seed=0, temperature=0.5)
    assert _once("ModelFreeAgent.sampling_settings()", cook.sampling_settings) == cook.sampling_params()
    # a framework agent built with settings=
    framework = object()
    old = _once("FrameworkAgent(settings=)", lambda: FrameworkAgent("toy:x", framework, settings={"v": 1}))
    assert old.params() == FrameworkAgent("toy:x", framework, params={"v": 1}).params()
    # the statistics' former constant
    import importlib
    module = importlib.import_module("cir.stats.decompose")
    assert _once("cir.stats.decompose.COHORTS", lambda: module.COHORTS) == module.SUBSETS
    # a router built with settings=
    router = Router.load(ROOT / "data" / "replicates" / "seed-0" / "router.json")
    again = _once("Router(settings=)", lambda: Router(router.features, router.models, router.thresholds,
                                                        settings=router.params, baselines=router.baselines,
                                                        training=router.training, operations=router.operations,
                                                        estimator=router.estimator.name, budget=router.budget,
                                                        cir_version=router.cir_version))
    assert again.to_dict() == router.to_dict()
    # a run record: agent_settings
    from support.keydoor import generate_tasks

    generate_tasks(tmp_path / "kd", "test", 2, 0)
    record = run_experiment(FAMILY.load_tasks(tmp_path / "kd" / "test"), tmp_path / "run",
                            RunSettings(family=NEW, replay=ReplaySettings(conditions=("clean",), delays=(0,)), jobs=1),
                            progress=False, echo=lambda _: None)
    assert _once("RunRecord.agent_settings", lambda: record.agent_settings) == record.agent_params == \
        KeyDoorAgent().params()
    kwargs = {k: getattr(record, k) for k in ("cir_version", "settings", "complete", "counts", "feasibility", "costs",
                                             "task_seconds_sum", "sessions", "task_ids")}
    rebuilt = _once("RunRecord(agent_settings=)", lambda: RunRecord(**kwargs, agent_settings=record.agent_params))
    assert rebuilt.agent_params == record.agent_params
    # a study's configs: Experiment(env=), .env, load_experiments(env=)
    folder = HERE / "experiments_0_1"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CirDeprecationWarning)  # the files' own env key, checked above
        configs = load_experiments(folder)
    loaded = _once("load_experiments(env=)", lambda: load_experiments(folder, env=OLD_MODULE))
    assert loaded == configs
    first = configs[0]
    assert _once("Experiment.env", lambda: first.env) == first.family == OLD_MODULE
    fields = {k: getattr(first, k) for k in ("name", "role", "order", "split", "n_tasks", "quick_n_tasks", "replay",
                                             "source", "fit_cir")}
    assert _once("Experiment(env=)", lambda: Experiment(**fields, env=OLD_MODULE)) == first
    with pytest.raises(TypeError, match="got both env= and family="):
        Experiment(**fields, env=OLD_MODULE, family=OLD_MODULE)


def test_every_piece_is_listed_in_the_readme() -> None:
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    for path in sorted(HERE.rglob("*")):
        if path.is_file() and path.name not in ("README.md", "test_compat.py") and "__pycache__" not in path.parts:
            assert str(path.relative_to(HERE)) in readme, f"tests/compat/README.md does not list {path.relative_to(HERE)}"
    for name in FORMER:  # every former name is run by some piece
        assert f"`{name}`" in readme, f"tests/compat/README.md does not say which piece runs {name}"
