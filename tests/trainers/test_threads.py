"""Issue 53, item 4: `torch_threads: auto` (the main job's preset) takes the cores the process
actually gets, less the busy ones, and the run records the count it used."""

import os

import pytest

from agentgym.errors import ConfigError
from agentgym.trainers.config import load_config
from agentgym.trainers.threads import auto_threads, set_torch_threads, usable_cores


def test_auto_takes_the_free_cores_and_never_fewer_than_one():
    assert auto_threads(cores=2, load=0.1) == 2       # an idle 2-core box
    assert auto_threads(cores=2, load=1.2) == 1       # another job on one core
    assert auto_threads(cores=2, load=4.0) == 1       # a loaded box
    assert auto_threads(cores=16, load=3.4) == 13


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux's")
def test_usable_cores_follow_the_affinity_this_process_gets():
    mask = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(mask)})
        assert usable_cores() == 1 and auto_threads(load=0.0) == 1
    finally:
        os.sched_setaffinity(0, mask)
    assert usable_cores() <= len(mask)


def test_the_main_job_preset_picks_its_threads_and_logs_the_count():
    import torch

    cfg = load_config("household-tiny")
    assert cfg.torch_threads == "auto"
    before = torch.get_num_threads()
    lines = []
    try:
        used = set_torch_threads(cfg.torch_threads, lines.append)
        assert used == torch.get_num_threads() == auto_threads() and 1 <= used <= usable_cores()
        assert f"torch_threads={used} repeats this run exactly" in lines[0]
    finally:
        torch.set_num_threads(before)


def test_a_thread_count_that_is_neither_a_number_nor_auto_is_one_line():
    with pytest.raises(ConfigError, match="torch_threads='many'"):
        load_config("household-tiny", ["torch_threads=many"])
    with pytest.raises(ConfigError, match="torch_threads=0"):
        load_config("household-tiny", ["torch_threads=0"])
