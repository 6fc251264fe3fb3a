"""Progress: bars on a terminal, lines with elapsed time and ETA in a log, silence outside a command."""

from __future__ import annotations

import io
import re
import subprocess
import sys

import pytest

import agentgym
from agentgym import progress
from agentgym.policies.scripted import OraclePolicy

LINE = re.compile(r"^(?P<desc>.+?) (?P<done>\d+)/(?P<total>\d+) (?P<unit>\w+) \(\d+%\)  elapsed (?P<elapsed>[\d:]+)"
                  r"  eta (?P<eta>[\d:?]+)(?:  (?P<info>.*))?$")


def lines(stream: io.StringIO) -> list[str]:
    return [line for line in stream.getvalue().splitlines() if line]


def test_plain_mode_prints_a_line_per_epoch_with_elapsed_and_eta(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    with progress.session(stream=out, mode="plain"):
        with progress.bar("SFT", total=4, unit="epochs", every=None) as bar:
            for epoch in range(4):
                clock[0] += 30.0
                bar.update(epoch + 1, info=f"loss {1.0 / (epoch + 1):.2f}")
                bar.line()
    got = [LINE.match(line) for line in lines(out)]
    assert all(got) and len(got) == 4, lines(out)
    assert [m["done"] for m in got] == ["1", "2", "3", "4"]
    assert [m["elapsed"] for m in got] == ["0:30", "1:00", "1:30", "2:00"]
    assert [m["eta"] for m in got] == ["1:30", "1:00", "0:30", "0:00"]
    assert got[1]["info"] == "loss 0.50"


def test_eta_from_item_times_leaves_setup_out(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    with progress.session(stream=io.StringIO(), mode="plain"):
        with progress.bar("RL", total=10, completed=0, every=None) as bar:
            clock[0] += 500.0  # SFT and the first evaluation
            bar.update(4, item_seconds=10.0)  # resumed at 3: this process ran one 10 s iteration
            assert bar.eta() == pytest.approx(60.0)


def test_throttled_lines_and_quiet_nested_bars(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    with progress.session(stream=out, mode="plain"):
        with progress.bar("eval", total=100, unit="episodes", every=60.0) as outer:
            for k in range(1, 101):
                clock[0] += 2.0
                outer.update(k)
                with progress.bar("collect", total=1, unit="episodes", every=60.0) as inner:
                    inner.update(1)
    text = lines(out)
    assert all(line.startswith("eval") for line in text)  # a nested bar's last line would be noise
    assert len(text) == 200 // 60 + 1  # one a minute, one at the end
    assert LINE.match(text[-1])["done"] == "100"


def test_no_output_outside_a_session(capsys):
    with progress.bar("x", total=3) as bar:
        bar.update(3)
        bar.line("done")
    assert not bar.active
    assert capsys.readouterr().out == ""


def test_evaluate_and_collect_show_progress_inside_a_session():
    from agentgym.evaluation.evaluate import evaluate

    env = "agentgym/Household-v0"
    space = agentgym.get_task_space(env)
    out = io.StringIO()
    with progress.session(stream=out, mode="plain"):
        evaluate(env, OraclePolicy(space), split="heldout", limit=3)
        agentgym.collect(env, space.split("heldout")[:2], OraclePolicy(space), 2)
    text = lines(out)
    assert len(text) == 2, text
    evaluation = LINE.match(text[0])  # in turns too (tests/evaluation/test_eval_progress.py), episodes in the info
    assert evaluation["desc"] == "eval heldout" and evaluation["unit"] == "turns" and "3/3 episodes" in text[0]
    assert evaluation["done"] == evaluation["total"]
    collect = LINE.match(text[1])  # counted in turns (episodes of a batch often end together), episodes in the info
    assert collect["desc"] == "collect 2 tasks x 2" and collect["done"] == collect["total"] and int(collect["total"]) >= 4
    assert "4/4 episodes" in text[1]


def test_rollout_command_logs_progress_when_not_a_terminal(tmp_path):
    out = subprocess.run([sys.executable, "-m", "agentgym.cli", "rollout", "agentgym/Household-v0", "--policy", "oracle",
                          "--limit", "3"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    announced, first = out.stdout.splitlines()[:2]  # the episode count it will play, then the progress line
    assert announced == "3 tasks x 1 episodes = 3 episodes"
    assert LINE.match(first) and "collect 3 tasks x 1 " in first and "3/3 episodes" in first


def test_a_session_is_its_own_not_a_process_global():
    """Two commands' sessions at once (two threads, as two tests or an app serving two users): each
    one's bars and lines go to its own stream; a module-global session sent the second's to the first."""
    import threading

    both_open = threading.Barrier(2)
    streams = {name: io.StringIO() for name in ("a", "b")}

    def command(name: str) -> None:
        with progress.session(stream=streams[name], mode="plain"):
            both_open.wait(timeout=10)
            with progress.bar(f"job-{name}", total=1, every=None) as bar:
                bar.update(1)
                bar.line()
            progress.log(f"done {name}")
            both_open.wait(timeout=10)  # neither closes before the other has written

    threads = [threading.Thread(target=command, args=(name,)) for name in streams]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    for name, out in streams.items():
        text = lines(out)
        assert len(text) == 2 and text[0].startswith(f"job-{name} 1/1") and text[1] == f"done {name}", (name, text)


def test_a_session_handed_down_draws_where_it_is_called():
    """The session is an object: code handed it (a thread of the command) opens bars in it."""
    import threading

    out = io.StringIO()
    with progress.session(stream=out, mode="plain") as s:
        def worker():
            with s.bar("worker", total=2, unit="steps", every=None) as bar:
                bar.update(2)
                bar.line()

        t = threading.Thread(target=worker)
        t.start()
        t.join(timeout=10)
    assert [LINE.match(line)["desc"] for line in lines(out)] == ["worker"]
