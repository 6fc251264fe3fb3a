import pytest


@pytest.fixture
def wide_cli_console(monkeypatch):
    """`agentgym models` prints on agentgym.cli.console, whose width was fixed when it was made (COLUMNS
    then, or the log's width): a test that reads whole table rows widens it, not COLUMNS."""
    from agentgym import cli as agentgym_cli

    monkeypatch.setattr(agentgym_cli.console, "width", 300)
