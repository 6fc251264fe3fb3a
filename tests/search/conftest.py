"""Shared fixtures: the world, its corpus and its index are built once per test session.

The index cache goes to a session temporary folder so that tests never depend on (or write
to) the user's ~/.cache."""

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def search_cache_dir(tmp_path_factory):
    old = os.environ.get("AGENTGYM_CACHE_DIR")
    path = tmp_path_factory.mktemp("search-cache")
    os.environ["AGENTGYM_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("AGENTGYM_CACHE_DIR", None)
    else:
        os.environ["AGENTGYM_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def source(search_cache_dir):
    from agentgym.envs.search.dataset import world_source

    src = world_source(0)
    _ = src.index
    return src


@pytest.fixture(scope="session")
def world(source):
    return source.world


@pytest.fixture(scope="session")
def space():
    from agentgym.envs.search.env import SearchQAEnv

    return SearchQAEnv.task_space


@pytest.fixture
def env(source):
    from agentgym.envs.search.env import SearchQAEnv

    e = SearchQAEnv()
    yield e
    e.close()
