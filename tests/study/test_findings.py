"""The report's findings: sentences built from the tables, with their intervals and tests."""

from __future__ import annotations

import pandas as pd

from cir.study.findings import cir_finding, effect_finding, mechanism_finding, small_cohort_warning


def _effects(stale_ci: tuple[float, float]) -> pd.DataFrame:
    rows = []
    for condition, effect, ci in (("stale2", 20.0, stale_ci), ("clean", -10.0, (-20.0, -2.5))):
        for delay in (0, 1, 4):
            rows.append({"condition": condition, "delay": delay, "n": 40, "rescues": 9 if effect > 0 else 0,
                         "harms": 1 if effect > 0 else 4, "effect_pp": effect + delay, "ci_low_pp": ci[0],
                         "ci_high_pp": ci[1], "sign_flip_p": 0.01234})
    return pd.DataFrame(rows)


def test_effect_finding_states_every_delay_with_its_interval():
    f = effect_finding(_effects((5.0, 35.0)), "primary cohort", "stale2")
    assert f.conclusive and f.n_tasks == 40
    # the primary cohort at every delay, not the strongest one
    assert ("after a stale2 observation refresh changed success by +20.0 pp [5.0, 35.0], +21.0 pp [5.0, 35.0], "
            "+24.0 pp [5.0, 35.0] at delays 0, 1, 4 (27 rescues and 3 harms over the delays)") in f.sentence
    assert "after a clean observation refresh changed success by -10.0 pp [-20.0, -2.5]" in f.sentence
    assert f.sentence.endswith("Every interval excludes zero.")


def test_an_interval_including_zero_is_said_plainly_and_warned_about():
    f = effect_finding(_effects((-5.0, 35.0)), "primary cohort", "stale2")
    assert not f.conclusive and "3 of 6 intervals include zero: 40 tasks cannot tell those effects from none" in f.sentence
    warning = small_cohort_warning([f], quick=True)
    assert warning.startswith("1 of these 1 answers (Effects of refresh, 40 tasks) has an interval that "
                              "includes zero: it does not show an effect either way.")
    two = small_cohort_warning([f, f], quick=False)
    assert two.startswith("2 of these 2 answers (Effects of refresh, 40 tasks; Effects of refresh, 40 tasks) "
                          "have an interval that includes zero: they do not show an effect either way.")
    assert "--quick" in warning
    assert small_cohort_warning([effect_finding(_effects((5.0, 9.0)), "c", "stale2")], quick=True) is None


def test_errors_that_made_no_run_fail_are_said_to_leave_nothing_to_rescue():
    effects = _effects((-5.0, 0.0)).assign(success_without=1.0)
    f = effect_finding(effects, "primary cohort", "stale2")
    assert f.nothing_to_rescue and "nothing for a recovery to rescue" in f.sentence
    warning = small_cohort_warning([f], quick=True)
    assert "nothing to rescue: that, not the size of the cohorts" in warning and "--quick" not in warning
    failing = _effects((-5.0, 0.0)).assign(success_without=[0.9, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert not effect_finding(failing, "c", "stale2").nothing_to_rescue  # stale2 failed at delay 0
    assert not effect_finding(_effects((-5.0, 0.0)), "c", "stale2").nothing_to_rescue  # no column: not said


def test_mechanism_and_cir_findings():
    joint = pd.DataFrame([{"comparison": "refresh vs refresh_ablated", "n_tasks": 30, "effect_pp": 10.0,
                           "ci_low_pp": 3.3, "ci_high_pp": 16.7, "sign_flip_p": 0.03}])
    cells = pd.DataFrame([{"operation": "placebo", "condition": "stale2", "delay": 4, "effect_pp": -3.3,
                           "ci_low_pp": -10.0, "ci_high_pp": 0.0, "sign_flip_p": 0.5}])
    m = mechanism_finding(joint, cells, "stale2", 4)
    assert m.conclusive and "changed success by +10.0 pp (95% CI 3.3 to 16.7 pp; sign-flip p = 0.030)" in m.sentence
    assert "placebo) changed it by -3.3 pp" in m.sentence
    summary = pd.DataFrame([
        {"policy": p, "condition": c, "n_tasks": 76, "effect_pp": e, "ci_low_pp": e - 4, "ci_high_pp": e + 4,
         "sign_flip_p": 0.2, "intervention_rate": 0.1, "oracle_fraction": e / 10,
         "clean_harm_rate": 0.0 if c == "clean" else float("nan")}
        for p, e in (("cir", 3.0), ("cir_paired", 6.0), ("anomaly", 2.0), ("oracle", 10.0)) for c in ("all", "clean")])
    c = cir_finding(summary, epsilon=0.02)
    assert not c.conclusive and c.n_tasks == 76  # cir's interval includes zero
    assert "cir changed success by +3.0 pp against never recovering (95% CI -1.0 to 7.0 pp" in c.sentence
    assert "cir_paired changed success by +6.0 pp against never recovering (95% CI 2.0 to 10.0 pp" in c.sentence
    assert "60% of the gain of the oracle over every operation" in c.sentence and "clean harm 0.0%" in c.sentence and "(budget 2.0%)" in c.sentence
    assert "The anomaly rule changed it by +2.0 pp, the oracle over every operation by +10.0 pp" in c.sentence
