"""agentgym.hosts: the loopback rule the OpenEnv server, the gateway and the viewer share."""

from __future__ import annotations

import socket

import pytest

from agentgym.errors import ConfigError
from agentgym.hosts import EXPOSES, check_bind, check_host, host_name, is_loopback


@pytest.mark.parametrize("header, name", [("127.0.0.1:8100", "127.0.0.1"), ("[::1]:80", "::1"), ("[::1]", "::1"),
                                          ("LocalHost:9", "localhost"), ("example.com", "example.com"), ("", "")])
def test_host_name_drops_the_port_and_brackets(header, name):
    assert host_name(header) == name


@pytest.mark.parametrize("name", ["localhost", "LOCALHOST", "app.localhost", "127.0.0.1", "127.0.0.2", "::1", "[::1]"])
def test_loopback_names(name):
    assert is_loopback(name)


@pytest.mark.parametrize("name", ["0.0.0.0", "::", "192.168.1.10", "example.com", "localhost.example.com", "", "[::"])
def test_names_that_are_not_loopback(name):
    assert not is_loopback(name)


@pytest.mark.parametrize("server", sorted(EXPOSES))
def test_a_host_beyond_loopback_needs_allow_remote_and_says_what_it_exposes(server):
    with pytest.raises(ConfigError, match="--allow-remote") as err:
        check_host("0.0.0.0", False, server)
    assert EXPOSES[server] in str(err.value) and "\n" not in str(err.value)
    check_host("0.0.0.0", True, server)
    check_host("127.0.0.1", False, server)


def test_check_bind_names_the_real_cause():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(ConfigError, match="the port is in use"):
            check_bind("127.0.0.1", busy.getsockname()[1])
    with pytest.raises(ConfigError, match="not an address of this machine"):
        check_bind("192.0.2.1", 8000)  # TEST-NET: never this machine's
    with pytest.raises(ConfigError, match="0-65535"):
        check_bind("127.0.0.1", 70000)
    check_bind("127.0.0.1", 0)
