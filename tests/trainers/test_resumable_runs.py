"""The machinery of issue 35's long benchmarks (benchmarks/harness/jobs.py and the RFT arm of
benchmarks/learning/rl_vs_baselines.py): the done-table skips finished runs and starts unfinished ones
again, SFT interrupted after a checkpoint resumes to the same weights, and RFT with no
successful rollout in its budget says so in one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness import jobs as rr  # noqa: E402

# A worker as the benchmarks' are: counts its starts, fails on its first start when asked (an
# interrupted run), otherwise writes its result. The dependency's result must exist before it runs.
WORKER = r"""
import json, sys
from pathlib import Path
root, key, fail_first, needs = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", sys.argv[4:]
folder = root / key
starts = folder / "starts"
n = int(starts.read_text()) + 1 if starts.exists() else 1
starts.write_text(str(n))
for dep in needs:
    assert (root / dep / "result.json").is_file(), f"{key} started before {dep} finished"
if fail_first and n == 1:
    sys.exit("killed")
(folder / "result.json").write_text(json.dumps({"key": key, "starts": n}))
"""


def commands(tmp_path: Path, flaky: set[str]):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)

    def command(job: rr.Job, threads):
        return [sys.executable, str(script), str(tmp_path / "runs"), job.key, "1" if job.key in flaky else "0",
                *job.after]

    return command


def starts(tmp_path: Path, key: str) -> int:
    return int((tmp_path / "runs" / key / "starts").read_text())


def test_done_table_skips_finished_runs_and_restarts_unfinished_ones(tmp_path):
    jobs = [rr.Job("warm/seed0"), rr.Job("rl/seed0", ("warm/seed0",)), rr.Job("sft/seed0", ("rl/seed0",)),
            rr.Job("other/seed1")]
    root = tmp_path / "runs"
    table = rr.DoneTable(root / "done.json")
    lines: list[str] = []
    failed = rr.run_jobs(jobs, table, commands(tmp_path, flaky={"rl/seed0"}), root, parallel=2, poll_s=0.05,
                         log=lines.append)
    # the interrupted run and the one waiting for it are reported; the others finished
    assert failed == ["rl/seed0", "sft/seed0"]
    assert set(json.loads((root / "done.json").read_text())["done"]) == {"warm/seed0", "other/seed1"}
    assert any("rl/seed0: FAILED" in line and "killed" in line for line in lines)
    assert not (root / "sft/seed0").exists()  # never started

    # run again: finished runs are skipped (started once), the interrupted one starts again
    table = rr.DoneTable(root / "done.json")
    lines.clear()
    landed: list[str] = []
    assert rr.run_jobs(jobs, table, commands(tmp_path, flaky={"rl/seed0"}), root, parallel=2, poll_s=0.05,
                       log=lines.append, on_done=landed.append) == []
    assert landed == ["rl/seed0", "sft/seed0"]  # the figures are rewritten as each run lands
    assert starts(tmp_path, "warm/seed0") == 1 and starts(tmp_path, "other/seed1") == 1
    assert starts(tmp_path, "rl/seed0") == 2 and starts(tmp_path, "sft/seed0") == 1
    assert "2 of 4 runs already done" in lines[0]
    assert any("rl/seed0: started (resuming)" in line for line in lines)
    assert table["rl/seed0"] == {"key": "rl/seed0", "starts": 2}

    # a third time: nothing runs; a result written after the scheduler died is picked up
    (root / "late").mkdir()
    (root / "late" / "result.json").write_text('{"late": 1}')
    table = rr.DoneTable(root / "done.json")
    assert rr.run_jobs(jobs + [rr.Job("late")], table, commands(tmp_path, set()), root, poll_s=0.05,
                       log=lines.append) == []
    assert starts(tmp_path, "rl/seed0") == 2 and table["late"] == {"late": 1}


def test_unknown_dependency_and_changed_settings_are_one_line(tmp_path):
    with pytest.raises(ValueError, match="waits for warm/seed9, which is not among the jobs"):
        rr.run_jobs([rr.Job("rl/seed0", ("warm/seed9",))], rr.DoneTable(tmp_path / "d.json"),
                    commands(tmp_path, set()), tmp_path)
    rr.check_settings(tmp_path, {"overrides": ["iterations=60"]})
    rr.check_settings(tmp_path, {"overrides": ["iterations=60"]})  # the same experiment: fine
    with pytest.raises(SystemExit, match="were made with other settings"):
        rr.check_settings(tmp_path, {"overrides": ["iterations=2"]})


def test_passthrough_drops_only_the_schedulers_own_argument():
    argv = ["--seeds", "0", "1", "--parallel", "2", "--runs", "r", "--parallel=3", "--", "iterations=1"]
    assert rr.passthrough(argv, ["iterations=1"]) == ["--seeds", "0", "1", "--runs", "r", "--", "iterations=1"]


def test_overrides_given_without_a_separator_reach_the_worker_after_one():
    """`--seeds 0 1 torch_threads=1` parses in the scheduler; a worker given it verbatim failed
    ("--seeds: invalid int value: 'torch_threads=1'")."""
    argv = ["--seeds", "0", "1", "torch_threads=1", "--parallel", "1"]
    assert rr.passthrough(argv, ["torch_threads=1"]) == ["--seeds", "0", "1", "--", "torch_threads=1"]


def test_sft_interrupted_after_a_checkpoint_resumes_to_the_same_weights(tmp_path, tiny_policy_factory, toy_env_id):
    from agentgym.registration import get_task_space
    from agentgym.trainers.sft import oracle_trajectories, sft_samples

    from .conftest import SHORT_CHAT

    policy = tiny_policy_factory()
    samples = sft_samples(policy, oracle_trajectories(toy_env_id, get_task_space(toy_env_id).split("train")[:6],
                                                      SHORT_CHAT, None))
    straight = rr.sft_steps(policy, samples, tmp_path / "a", steps=6, batch_size=4, lr=1e-3, seed=1,
                            checkpoint_every=2, log=lambda line: None)

    def killed_after_step_4(line: str) -> None:  # the process dies right after the checkpoint of step 4
        if "step 4/" in line:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        rr.sft_steps(tiny_policy_factory(), samples, tmp_path / "b", steps=6, batch_size=4, lr=1e-3, seed=1,
                     checkpoint_every=2, log=killed_after_step_4)
    lines: list[str] = []
    resumed_policy = tiny_policy_factory()
    resumed = rr.sft_steps(resumed_policy, samples, tmp_path / "b", steps=6, batch_size=4, lr=1e-3, seed=1,
                           checkpoint_every=2, log=lines.append)
    assert lines[0].startswith("SFT resumed at step 4 of 6")
    assert resumed == straight  # steps, tokens, first and last losses
    for (name, a), b in zip(policy.model.state_dict().items(), resumed_policy.model.state_dict().values()):
        assert torch.equal(a, b), name


def test_rft_with_no_successful_rollout_is_one_line(tmp_path, tiny_policy_factory, toy_config, tiny_model_dir):
    from agentgym.registration import get_task_space

    from benchmarks.learning import rl_vs_baselines as rvb

    # one turn per episode: the key is never in the first room, so no episode can succeed
    cfg = toy_config(tmp_path, tiny_model_dir, "env.max_turns=1")
    tasks = get_task_space(cfg.env.id).split("train")
    with pytest.raises(rvb.NoSuccessfulRollouts) as info:
        rvb.run_rft(tiny_policy_factory(), cfg, tasks, tmp_path / "rft", steps_per_iteration=[1, 1], batch_size=4,
                    lr=1e-3, seed=0, log=lambda line: None)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("rft: no successful rollouts after its budget of 8 episodes (2 iterations x 2 tasks x 2)")


def test_rft_trains_on_its_successes_and_resumes_to_the_same_weights(tmp_path, sft_model_dir, toy_config):
    from agentgym.policies.hf import HFPolicy
    from agentgym.registration import get_task_space

    from benchmarks.learning import rl_vs_baselines as rvb

    cfg = toy_config(tmp_path, sft_model_dir)
    tasks = get_task_space(cfg.env.id).split("train")
    kwargs = dict(steps_per_iteration=[2, 1, 2], batch_size=4, lr=1e-3, seed=0)
    straight_policy = HFPolicy(sft_model_dir)
    straight = rvb.run_rft(straight_policy, cfg, tasks, tmp_path / "a", log=lambda line: None, **kwargs)
    assert straight["successes"] > 0 and straight["steps"] == 5 and straight["episodes"] == 12
    assert straight["buffer"] > 0 and straight["tokens"] > 0

    def killed_after_iteration_2(line: str) -> None:
        if line.startswith("RFT iteration 2/"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        rvb.run_rft(HFPolicy(sft_model_dir), cfg, tasks, tmp_path / "b", log=killed_after_iteration_2, **kwargs)
    lines: list[str] = []
    resumed_policy = HFPolicy(sft_model_dir)
    resumed = rvb.run_rft(resumed_policy, cfg, tasks, tmp_path / "b", log=lines.append, **kwargs)
    assert lines[0].startswith("RFT resumed at iteration 2")
    assert resumed == straight
    for (name, a), b in zip(straight_policy.model.state_dict().items(), resumed_policy.model.state_dict().values()):
        assert torch.equal(a, b), name


def test_rl_vs_baselines_jobs_wait_for_what_they_match_and_tune_on_another_seed(tmp_path):
    import argparse

    from benchmarks.learning import rl_vs_baselines as rvb

    args = argparse.Namespace(seeds=[0, 1], arms=list(rvb.ARMS), tune_seed=100, lrs_rl=[1e-4, 3e-4],
                              lrs_sft=[1e-3], overrides=[])
    jobs = {j.key: set(j.after) for j in rvb.jobs(args)}
    assert {"ceiling", "warm/seed0", "warm/seed1", "warm/seed100", "tune/rl/lr0.0001", "tune/rl/lr0.0003"} <= set(jobs)
    assert not any(k.startswith("tune/sft") or k.startswith("tune/rft") for k in jobs)  # one rate given: not tuned
    assert jobs["rl/seed1"] == {"warm/seed1", "tune/rl/lr0.0001", "tune/rl/lr0.0003"}
    assert jobs["rft/seed1"] == {"warm/seed1", "rl/seed1"}  # matches the compute of its seed's RL run
    assert jobs["tune/rl/lr0.0003"] == {"warm/seed100"}
    table = rr.DoneTable(tmp_path / "done.json")
    table.mark("tune/rl/lr0.0001", {"validation": {"success_rate": 0.2}})
    table.mark("tune/rl/lr0.0003", {"validation": {"success_rate": 0.3}})
    assert rvb.chosen_lr(table, args, "rl") == 3e-4 and rvb.chosen_lr(table, args, "rft") == 1e-3
    args.lrs_sft = [1e-3, 3e-3]  # tuned baselines match the compute of RL's tuning runs
    jobs = {j.key: set(j.after) for j in rvb.jobs(args)}
    assert jobs["tune/sft_filtered/lr0.003"] == {"warm/seed100", "tune/rl/lr0.0001", "tune/rl/lr0.0003"}


def test_the_best_rate_is_the_best_validation_success_and_the_first_of_equal_bests(tmp_path):
    table = rr.DoneTable(tmp_path / "done.json")
    for lr, score in ((1e-5, 0.25), (3e-5, 0.5), (1e-4, 0.5)):
        table.mark(rr.tune_key("gigpo", lr), {"validation": {"success_rate": score}})
    assert rr.best_rate(table, "gigpo", [1e-5, 3e-5, 1e-4]) == 3e-5
    assert rr.best_rate(table, "gigpo", [1e-4, 3e-5]) == 1e-4  # the order given breaks the tie
    assert rr.best_rate(table, "sft", [2e-5]) == 2e-5  # one rate given: no tuning run is read
    with pytest.raises(KeyError):
        rr.best_rate(table, "gigpo", [1e-5, 3e-4])  # a tuning run not done yet


def test_grpo_runs_only_as_the_check_of_its_identity_with_gigpo_omega0(tmp_path):
    """At norm_std=false GRPO is GiGPO with omega=0: grpo runs on the first seeds only, and its other
    seeds are gigpo_omega0's exactly when the checked seeds agree (otherwise only its own runs count)."""
    import argparse

    from benchmarks.learning import estimators_llm as el

    args = argparse.Namespace(seeds=[0, 1, 2, 3], estimators=list(el.ESTIMATORS), overrides=[], threads=None,
                              runs=str(tmp_path))
    keys = {j.key for j in el.jobs(args)}
    assert {"grpo/seed0", "grpo/seed1"} <= keys and "grpo/seed2" not in keys and "gigpo_omega0/seed3" in keys

    def record(success):
        tasks = {"a": success, "b": 1.0 - success}
        return {"heldout": {"success_rate": success, "per_task_success": tasks}, "heldout_unseen": {"success_rate": 0.1},
                "heldout_before": {"success_rate": 0.0}, "credit": []}

    for agree in (True, False):
        table = rr.DoneTable(tmp_path / f"done{agree}.json")
        for s in range(4):
            table.mark(f"gigpo_omega0/seed{s}", record(0.1 * s))
        table.mark("grpo/seed0", record(0.0))
        table.mark("grpo/seed1", record(0.1 if agree else 0.5))
        out = el.report(args, table)
        assert out["grpo_is_gigpo_omega0"]["identical"] is agree
        assert out["estimators"]["grpo"]["seeds"] == ([0, 1, 2, 3] if agree else [0, 1])


def test_rl_compute_counts_each_iteration_once_after_a_resume(tmp_path):
    rows = [{"step": 1, "iteration": 1, "train/optimizer_steps": 4, "train/tokens": 100, "train/samples": 10,
             "rollout/episodes": 48},
            {"step": 2, "iteration": 2, "train/optimizer_steps": 5, "train/tokens": 120, "train/samples": 12,
             "rollout/episodes": 48},
            # resumed from the checkpoint of iteration 1: iteration 2 is logged again, the same way
            {"step": 2, "iteration": 2, "train/optimizer_steps": 5, "train/tokens": 120, "train/samples": 12,
             "rollout/episodes": 48},
            {"step": 2, "iteration": 2, "eval/success_rate": 0.5}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert rr.rl_compute(tmp_path) == {"optimizer_steps": 9, "tokens": 220, "samples": 22, "rollout_episodes": 96,
                                       "steps_per_iteration": [4, 5], "iterations": 2}


def test_paired_diff_pairs_tasks_within_a_seed_and_pools_the_seeds():
    a = [{"t1": 1.0, "t2": 0.5}, {"t1": 0.0, "t2": 1.0, "t3": 1.0}]
    b = [{"t1": 0.0, "t2": 0.5}, {"t1": 0.0, "t2": 0.0}]  # t3 was not evaluated for b: left out
    out = rr.paired_diff(a, b)
    assert out["pairs"] == 4 and out["seeds"] == 2
    assert out["diff"] == pytest.approx((1.0 + 0.0 + 0.0 + 1.0) / 4)
    assert out["ci"][0] <= out["diff"] <= out["ci"][1]
    assert out["per_seed"] == pytest.approx([0.5, 0.5]) and out["seed_ci"] == pytest.approx([0.5, 0.5])


def test_the_seed_interval_holds_the_spread_between_seeds():
    assert rr.seed_interval([0.1]) is None  # one seed: no spread to measure
    low, high = rr.seed_interval([0.0, 0.1, 0.2])  # mean 0.1, sd 0.1, t(2) = 4.303
    assert (low, high) == pytest.approx((0.1 - 4.303 * 0.1 / 3 ** 0.5, 0.1 + 4.303 * 0.1 / 3 ** 0.5))
    assert rr.seed_interval([0.05] * 6) == pytest.approx([0.05, 0.05])


def test_a_second_worker_of_the_same_job_stops_with_one_line(tmp_path):
    lock = rr.hold_job_lock(tmp_path, "rl/seed0")
    with pytest.raises(SystemExit, match=r"rl/seed0: another process \(pid \d+\) is running this job"):
        rr.hold_job_lock(tmp_path, "rl/seed0")
    lock.close()  # the first one ended: the job can be run again
    rr.hold_job_lock(tmp_path, "rl/seed0").close()


SCHEDULER = r"""
import sys
sys.path.insert(0, sys.argv[2])
from benchmarks.harness import jobs as rr
from pathlib import Path
root = Path(sys.argv[1])
worker = "import os, time; open(os.path.join(%r, 'worker.pid'), 'w').write(str(os.getpid())); time.sleep(120)" % str(root)
rr.run_jobs([rr.Job("slow")], rr.DoneTable(root / "done.json"), lambda job, threads: [sys.executable, "-c", worker],
            root, poll_s=0.05)
"""


def test_killing_the_scheduler_ends_its_workers(tmp_path):
    import os
    import signal
    import subprocess
    import time

    bench = str(Path(__file__).resolve().parents[2])  # the repository root
    scheduler = subprocess.Popen([sys.executable, "-c", SCHEDULER, str(tmp_path), bench])
    pid_file = tmp_path / "worker.pid"
    for _ in range(200):
        if pid_file.is_file() and pid_file.read_text():
            break
        time.sleep(0.05)
    worker = int(pid_file.read_text())
    scheduler.send_signal(signal.SIGTERM)
    assert scheduler.wait(timeout=30) == 143
    with pytest.raises(ProcessLookupError):  # reaped by the scheduler: gone, not a zombie
        os.kill(worker, 0)


def test_credit_by_phase_averages_each_phase_over_seeds_and_iterations():
    from benchmarks.learning import estimators_llm as el

    seed_a = [{"iteration": 1, "idle_frac": 0.6, "adv_step/idle": -0.02}, {"iteration": 12, "idle_frac": 0.2}]
    seed_b = [{"iteration": 2, "idle_frac": 0.4, "adv_step/idle": None}]  # no idle step in that batch: no value
    out = el.credit_by_phase([seed_a, seed_b])
    assert out["1-10"]["idle_frac"] == pytest.approx(0.5) and out["1-10"]["adv_step/idle"] == pytest.approx(-0.02)
    assert out["11-20"]["idle_frac"] == pytest.approx(0.2) and out["21-40"]["idle_frac"] is None


def test_arm_and_seed_reads_a_job_key():
    assert rr.arm_and_seed("gigpo_omega0/seed12") == ("gigpo_omega0", 12)


def test_an_arm_job_says_its_rate_and_the_rl_run_it_matches(tmp_path):
    """verdict.py's and rl_vs_baselines.py's jobs (rr.arm_job): a tuning run of an imitation arm
    matches the RL arm's tuning run at the RL arm's chosen rate, a final run the RL run of its seed;
    an RL arm matches nothing, and refusing a matched run that made no step is one line."""
    rates = {"gigpo": 1e-4, "grpo": 3e-4, "sft": 1e-3}
    tune = rr.arm_job("tune/sft/lr0.003", 100, rates.get, "gigpo", ("gigpo", "grpo"))
    assert (tune.arm, tune.seed, tune.lr, tune.tuning, tune.matched_to) == ("sft", 100, 0.003, True,
                                                                           "tune/gigpo/lr0.0001")
    final = rr.arm_job("sft/seed3", 100, rates.get, "gigpo", ("gigpo", "grpo"))
    assert (final.seed, final.lr, final.tuning, final.matched_to) == (3, 1e-3, False, "gigpo/seed3")
    assert rr.arm_job("grpo/seed3", 100, rates.get, "gigpo", ("gigpo", "grpo")).matched_to is None
    assert rr.arm_job("tune/grpo/lr3e-05", 100, rates.get, "gigpo", ("gigpo", "grpo")).matched_to is None
    table = rr.DoneTable(tmp_path / "done.json")
    table.mark("gigpo/seed3", {"compute": {"optimizer_steps": 0}})
    with pytest.raises(SystemExit, match="sft/seed3: the GiGPO run it matches \\(gigpo/seed3\\) made no optimizer steps"):
        rr.matched_budget(table, final, "GiGPO")


def test_real_llm_rl_runs_rl_then_its_rft_seed_by_seed_and_resumes_the_unfinished_one(tmp_path):
    """benchmarks/learning/real_llm_rl.py's jobs, one at a time: rl/seed0, rft/seed0 (which matches rl/seed0),
    rl/seed1, ...; an interrupted rft/seed0 starts again on the next run, the finished ones do not."""
    from benchmarks.learning import real_llm_rl as rlr

    jobs = rlr.jobs([0, 1])
    assert [(j.key, j.after) for j in jobs] == [("rl/seed0", ()), ("rft/seed0", ("rl/seed0",)),
                                               ("rl/seed1", ()), ("rft/seed1", ("rl/seed1",))]
    root = tmp_path / "runs"
    table = rr.DoneTable(root / "done.json")
    lines: list[str] = []
    failed = rr.run_jobs(jobs, table, commands(tmp_path, flaky={"rft/seed0"}), root, parallel=1, poll_s=0.05,
                         log=lines.append)
    assert failed == ["rft/seed0"]
    started = [line.split(":")[0] for line in lines if ": started" in line]
    assert started == ["rl/seed0", "rft/seed0", "rl/seed1", "rft/seed1"]  # seed by seed, not all RL first
    failed = rr.run_jobs(jobs, rr.DoneTable(root / "done.json"), commands(tmp_path, flaky={"rft/seed0"}), root,
                         parallel=1, poll_s=0.05, log=lines.append)
    assert failed == []
    assert [starts(tmp_path, k) for k in ("rl/seed0", "rft/seed0", "rl/seed1", "rft/seed1")] == [1, 2, 1, 1]


def test_real_llm_rl_gives_rft_the_steps_of_each_rl_iteration_and_pairs_both_with_the_start(
        tmp_path, sft_model_dir, toy_config, monkeypatch):
    """The two arms of a seed on the toy env (the tiny model standing in for SmolLM2): RFT starts from
    RL's start model, takes exactly RL's optimizer steps in each iteration with RL's samples per step
    (so about its tokens), is evaluated on the same held-out tasks, and both lifts are paired with
    the RL run's before-evaluation; the table lands under its key beside the file's other keys."""
    import argparse

    from benchmarks.learning import real_llm_rl as rlr

    def config(args, seed, folder, *extra):
        return toy_config(folder, sft_model_dir, "iterations=3", f"seed={seed}", f"run_dir={folder}", *extra)

    monkeypatch.setattr(rlr, "config", config)
    args = argparse.Namespace(runs=str(tmp_path / "runs"), seeds=[0], rft_lr=1e-3, threads=None, overrides=[])
    table = rr.DoneTable(tmp_path / "runs" / "done.json")
    rl = rlr.run_job(args, "rl/seed0")
    table.mark("rl/seed0", json.loads(json.dumps(rl)))
    assert rl["start_model"] == str(sft_model_dir) and rl["compute"]["optimizer_steps"] > 0
    assert len(rl["iteration_cpu_s"]) == 3 and all(s > 0 for s in rl["iteration_cpu_s"])
    rft = rlr.run_job(args, "rft/seed0")
    compute = rft["compute"]
    assert compute["steps_per_iteration"] == rl["compute"]["steps_per_iteration"]
    assert compute["optimizer_steps"] == rl["compute"]["optimizer_steps"] == compute["rl_optimizer_steps"]
    assert rft["batch_size"] == round(rl["compute"]["samples"] / rl["compute"]["optimizer_steps"])
    assert 0.5 < compute["tokens"] / compute["rl_tokens"] < 2.0  # the same kind of samples, as many per step
    assert rft["heldout_before"] == rl["heldout_before"]  # one start, one before-evaluation
    assert set(rft["heldout"]["per_task_success"]) == set(rl["heldout"]["per_task_success"])
    table.mark("rft/seed0", json.loads(json.dumps(rft)))

    out = tmp_path / "real_llm.json"
    out.write_text(json.dumps({"rows": ["zero-shot rows"]}))
    report = rlr.report(args, table)
    rr.write_json_key(out, rlr.KEY, report)
    whole = json.loads(out.read_text())
    assert whole["rows"] == ["zero-shot rows"] and whole[rlr.KEY]["runs_done"] == "2 of 2"
    before = rl["heldout_before"]["success_rate"]
    assert report["lift"]["rft"]["diff"] == pytest.approx(rft["heldout"]["success_rate"] - before)
    assert report["lift"]["rl"]["diff"] == pytest.approx(rl["heldout"]["success_rate"] - before)
    assert report["rl_minus_rft"]["diff"] == pytest.approx(rl["heldout"]["success_rate"]
                                                           - rft["heldout"]["success_rate"])
    assert "| rft | 0 |" in rlr.markdown(report)


def test_real_llm_rl_refuses_rft_when_its_rl_run_made_no_step():
    from benchmarks.learning import real_llm_rl as rlr
    from benchmarks.learning import rl_vs_baselines as rvb

    with pytest.raises(rvb.NoSuccessfulRollouts, match="RL run of seed 2 made no optimizer steps"):
        rlr.rft_budget({"seed": 2, "compute": {"optimizer_steps": 0, "samples": 0, "steps_per_iteration": [0, 0]}})


def test_sft_update_in_micro_batches_takes_the_step_of_one_pass(tiny_policy_factory):
    """RFT's step on a real model accumulates its gradient over small passes (a batch of 32 steps
    of 450 tokens would not fit in memory): the same step as one pass, up to float summation order;
    and the loss at the targets alone is the loss over every position's logits."""
    from agentgym.trainers.ppo import token_logprobs
    from agentgym.trainers.samples import collate, sft_sample
    from agentgym.trainers.sft import sft_loss

    g = torch.Generator().manual_seed(0)
    chunk = [sft_sample(torch.randint(5, 300, (n,), generator=g).tolist(), torch.randint(5, 300, (m,), generator=g).tolist())
             for n, m in [(12, 3), (20, 5), (7, 2), (15, 4), (9, 6)]]
    one, micro = tiny_policy_factory(), tiny_policy_factory()
    batch = collate(chunk, one.tokenizer.pad_token_id)
    logp, _ = token_logprobs(one.model, batch["input_ids"], batch["attention_mask"])
    everywhere = -(logp * batch["loss_mask"]).sum() / batch["loss_mask"].sum()
    assert float(sft_loss(one.model, batch).detach()) == pytest.approx(float(everywhere.detach()), rel=1e-5)
    results = []
    for policy, size in ((one, None), (micro, 2)):  # SGD: Adam's first step is the gradient's sign, blind to scale
        optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=1.0)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
        results.append(rr.sft_update(policy, optimizer, scheduler, chunk, micro_batch_size=size))
    assert results[0][1] == results[1][1] == sum(len(s) for s in chunk)
    assert results[1][0] == pytest.approx(results[0][0], rel=1e-5)
    moved = 0.0
    for (name, a), b, start in zip(one.model.state_dict().items(), micro.model.state_dict().values(),
                                   tiny_policy_factory().model.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-5), name
        moved = max(moved, float((a - start).abs().max()))
    assert moved > 1e-3  # the step did move the weights


def test_sft_steps_in_micro_batches_take_the_same_steps(tmp_path, tiny_policy_factory, toy_env_id, monkeypatch):
    """The SFT arm of a real model accumulates each step over passes of the RL run's micro batch
    (a whole batch in one pass took 21 GB on household-smol): the same steps, up to float rounding."""
    from agentgym.registration import get_task_space
    from agentgym.trainers.sft import oracle_trajectories, sft_samples

    from .conftest import SHORT_CHAT

    whole, split = tiny_policy_factory(), tiny_policy_factory()
    samples = sft_samples(whole, oracle_trajectories(toy_env_id, get_task_space(toy_env_id).split("train")[:6],
                                                     SHORT_CHAT, None))
    a = rr.sft_steps(whole, samples, tmp_path / "a", steps=3, batch_size=6, lr=1e-3, seed=1, log=lambda line: None)
    import agentgym.trainers.samples as samples_module

    passes, collate = [], samples_module.collate
    monkeypatch.setattr(samples_module, "collate", lambda chunk, *args, **kw: passes.append(len(chunk)) or
                        collate(chunk, *args, **kw))
    b = rr.sft_steps(split, samples, tmp_path / "b", steps=3, batch_size=6, lr=1e-3, seed=1, log=lambda line: None,
                     micro_batch_size=2)
    assert passes == [2] * 9  # three passes of two samples a step
    assert a["tokens"] == b["tokens"] and a["steps"] == b["steps"] == 3
    assert a["final_loss"] == pytest.approx(b["final_loss"], rel=1e-4)
    for (name, x), y in zip(whole.model.state_dict().items(), split.model.state_dict().values()):
        assert torch.allclose(x, y, atol=1e-5), name
