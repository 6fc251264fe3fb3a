import json

import pytest

from agentgym import Step, Trajectory
from agentgym.policies import OraclePolicy, RandomPolicy
from agentgym.evaluation.evaluate import compute_metrics, evaluate
from agentgym.evaluation.report import ReportError, compare, load_report, render_markdown, write_report
from agentgym.evaluation.stats import newcombe_difference, wilson_interval

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _trajs(successes, episodes, task="t", infra=0):
    out = [Trajectory(task_id=f"{task}{i % 2}", group_id="g", success=i < successes, score=float(i < successes),
                      steps=[Step(observation="", anchor="", action_valid=True)])
           for i in range(episodes)]
    out += [Trajectory(task_id=f"{task}0", group_id="g", infra_error=True, error="policy error: timeout")] * infra
    return out


def test_markdown_holds_the_numbers_and_infra_errors():
    r = compute_metrics(_trajs(8, 10, infra=1), categories={"t0": "easy", "t1": "hard"}, env_id="agentgym/X-v0",
                        split="heldout", policy="MyPolicy")
    text = render_markdown(r)
    wilson = wilson_interval(8, 10)
    assert "| success rate | 0.800 | [0.490, 0.943] | 10 episodes |" in text
    assert f"[{wilson.low:.3f}, {wilson.high:.3f}]" in text
    assert "| pass@1 |" in text and "| pass@5 |" in text
    # t0 was asked for 6 episodes but one broke: no task has 6 scored episodes
    assert "| pass@6 | n/a | n/a | 0 tasks |" in text
    assert "| easy | 1 | 5 | 0.800 [0.376, 0.964]" in text and "| hard | 1 | 5 |" in text
    assert "1 infra error(s) excluded" in text and "`policy error: timeout`" in text
    assert text.startswith("# Evaluation of MyPolicy on agentgym/X-v0 (heldout)")


def test_write_report_files_and_load_back(counter_env, tmp_path):
    r = evaluate(counter_env, RandomPolicy(seed=0), episodes_per_task=3)
    paths = write_report(r, tmp_path / "rep", save_trajectories=True)
    assert set(paths) == {"json", "markdown", "plot", "trajectories"}
    data = json.loads(paths["json"].read_text())
    assert data["overall"]["success_rate"]["value"] == pytest.approx(r.success_rate)
    assert data["pass_at_k"]["3"]["value"] == pytest.approx(r.pass_at_k[3].value)
    md = paths["markdown"].read_text()
    assert f"| success rate | {r.success_rate:.3f} |" in md
    assert paths["plot"].read_bytes()[:8] == PNG_MAGIC
    assert len(paths["trajectories"].read_text().splitlines()) == 18
    again = load_report(tmp_path / "rep")
    assert again.to_dict() == r.to_dict()


def test_single_episode_report_plots_mean_score_instead_of_pass_at_k(counter_env, tmp_path):
    r = evaluate(counter_env, OraclePolicy(), limit=2)
    paths = write_report(r, tmp_path)
    assert paths["plot"].stat().st_size > 5000


def test_many_slash_categories_get_part_tables():
    trajs = []
    for i, (kind, level) in enumerate((k, lv) for k in "abcdef" for lv in ("easy", "hard")):
        trajs += [Trajectory(task_id=f"t{i}", group_id="g", success=level == "easy", score=1.0)]
    cats = {f"t{i}": f"{k}/{lv}" for i, (k, lv) in enumerate((k, lv) for k in "abcdef" for lv in ("easy", "hard"))}
    r = compute_metrics(trajs, categories=cats)
    text = render_markdown(r)
    assert "## By category, part 2 of 2 (`easy` in `a/easy`)" in text
    assert "| easy | 6 | 6 | 1.000 [0.610, 1.000]" in text and "| hard | 6 | 6 | 0.000 [0.000, 0.390]" in text


def test_load_report_errors_are_clear(tmp_path):
    with pytest.raises(ReportError, match="no evaluation report"):
        load_report(tmp_path)
    (tmp_path / "report.json").write_text('{"env_id": 1}')
    with pytest.raises(ReportError, match="not an agentgym evaluation report"):
        load_report(tmp_path)
    (tmp_path / "report.json").write_text("[" * 100_000 + "]" * 100_000)  # a RecursionError in json.loads
    with pytest.raises(ReportError, match="not an agentgym evaluation report .*nests too deeply") as err:
        load_report(tmp_path)
    assert "\n" not in str(err.value)


def test_newcombe_difference_hand_computed():
    # a = 8/10: p=.8 [.490160, .943317]; b = 2/10: p=.2 [.056683, .509840]
    d = newcombe_difference(wilson_interval(8, 10), wilson_interval(2, 10))
    assert d.value == pytest.approx(0.6)
    assert d.low == pytest.approx(0.6 - (2 * 0.309840**2) ** 0.5, abs=1e-5)  # 0.161822
    assert d.high == pytest.approx(0.6 + (2 * 0.143317**2) ** 0.5, abs=1e-5)  # 0.802682


def test_compare_table_and_plot(counter_env, tmp_path):
    warm = evaluate(counter_env, RandomPolicy(seed=0), episodes_per_task=2, policy_name="random")
    trained = evaluate(counter_env, OraclePolicy(), episodes_per_task=2, policy_name="oracle")
    text = compare({"warm start": warm, "trained": trained}, tmp_path / "cmp", title="warm vs trained")
    assert text.startswith("# warm vs trained")
    diff = newcombe_difference(trained.overall.success_rate, warm.overall.success_rate)
    assert f"{diff.value:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}]" in text
    assert "| trained | 12 | 0 | 1.000 [0.758, 1.000] | 1.000 [1.000, 1.000]" in text  # success, then score
    assert "Δ success vs warm start" in text and "## Success rate by category" in text and "| up-hard |" in text
    assert (tmp_path / "cmp" / "compare.png").read_bytes()[:8] == PNG_MAGIC
    assert set(json.loads((tmp_path / "cmp" / "compare.json").read_text())) == {"warm start", "trained"}
    # a list labels runs by policy name, de-duplicated
    text = compare([warm, warm])
    assert "| random |" in text and "| random (2) |" in text
    with pytest.raises(ReportError):
        compare([])
