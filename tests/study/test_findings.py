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


def test_effect_finding_states_number_interval_and_test():
    f = effect_finding(_effects((5.0, 35.0)), "primary cohort", "stale2", delay=1)
    assert f.conclusive and f.n_tasks == 40
    assert "after a stale2 observation, refresh at delay 1 changed success by +21.0 pp" in f.sentence
    assert "(9 rescues, 1 harms; 95% CI 5.0 to 35.0 pp; sign-flip p = 0.012)" in f.sentence
    assert "after a clean observation, refresh at delay 1 changed success by -9.0 pp" in f.sentence
    assert "ranges from +20.0 pp to +24.0 pp" in f.sentence
    assert f.sentence.endswith("The interval excludes zero.")


def test_an_interval_including_zero_is_said_plainly_and_warned_about():
    f = effect_finding(_effects((-5.0, 35.0)), "primary cohort", "stale2", delay=1)
    assert not f.conclusive and "40 tasks cannot tell this from no effect" in f.sentence
    warning = small_cohort_warning([f], quick=True)
    assert warning.startswith("1 of these 1 answers (Effects of refresh, 40 tasks) has an interval that "
                              "includes zero: it does not show an effect either way.")
    two = small_cohort_warning([f, f], quick=False)
    assert two.startswith("2 of these 2 answers (Effects of refresh, 40 tasks; Effects of refresh, 40 tasks) "
                          "have an interval that includes zero: they do not show an effect either way.")
    assert "--quick" in warning
    assert small_cohort_warning([effect_finding(_effects((5.0, 9.0)), "c", "stale2", 1)], quick=True) is None


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
         "sign_flip_p": 0.2, "intervention_rate": 0.1, "clean_harm_rate": 0.0 if c == "clean" else float("nan")}
        for p, e in (("cir", 3.0), ("always", -8.0), ("oracle", 10.0)) for c in ("all", "clean")])
    c = cir_finding(summary, epsilon=0.02)
    assert not c.conclusive and c.n_tasks == 76
    assert "CIR changed success by +3.0 pp against never recovering (95% CI -1.0 to 7.0 pp" in c.sentence
    assert "harming 0.0% of clean episodes (limit 2.0%)" in c.sentence
    assert "always refreshing changed it by -8.0 pp and the oracle by +10.0 pp" in c.sentence
