"""Which machines a local server answers: the one rule `agentgym serve`, the gateway and the viewer share.

Each binds to loopback unless the user passes `--allow-remote`, and, served on loopback, refuses a
request whose Host header is not a loopback name: a web page that reaches 127.0.0.1 through a name
its own DNS points there (DNS rebinding) sends that name. The checks run before a server's heavy
imports, so that a wrong `--host` or a taken port is one line within a second.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

from agentgym.errors import ConfigError

#: The Host names a loopback server answers (a port after them is allowed).
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")
#: What each server gives whoever reaches it, named when its --host goes beyond loopback.
EXPOSES = {"serve": "anyone who can reach it can play episodes, and run commands in SWE sandboxes",
           "gateway": "anyone who reaches it samples the policy and writes training data",
           "viewer": "anyone who reaches it reads your trajectories: prompts, model outputs and task data"}


def host_name(header: str) -> str:
    """The name in a Host header, lowercased, without its port or brackets:
    `127.0.0.1:8100` -> 127.0.0.1, `[::1]:80` -> ::1, `LocalHost` -> localhost."""
    host = header.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def is_loopback(name: str) -> bool:
    """Whether a host name or address (IPv6 with or without brackets) is this machine's loopback.
    Names under .localhost are loopback too (RFC 6761), as browsers treat them."""
    name = name.strip().lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def check_host(host: str, allow_remote: bool, server: str) -> None:
    """A `--host` beyond loopback needs `--allow-remote`; the error says what `server` (a key of
    EXPOSES) would give other machines."""
    if not allow_remote and not is_loopback(host):
        raise ConfigError(f"--host {host} serves other machines ({EXPOSES[server]}): add --allow-remote to mean it, "
                          "or use --host 127.0.0.1")


def bound_socket(host: str, port: int) -> socket.socket:
    """A socket bound to `host:port` (SO_REUSEADDR, as uvicorn binds), or one line with the real
    cause the address cannot be served (in use, not this machine's, needs privileges)."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port must be 0-65535, got {port}")
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(f"cannot serve on {host}:{port}: {host!r} is not a known address ({exc.strerror})") from None
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        why = {errno.EADDRINUSE: "the port is in use (pick another with --port)",
               errno.EADDRNOTAVAIL: f"{host} is not an address of this machine",
               errno.EACCES: f"port {port} needs privileges (use a port above 1023)"}.get(
            exc.errno, exc.strerror or str(exc))
        raise ConfigError(f"cannot serve on {host}:{port}: {why}") from None
    return sock


def check_bind(host: str, port: int) -> None:
    """Bind `host:port` once and let go, so that an address that cannot be served fails in one line
    before a server that binds it later starts."""
    bound_socket(host, port).close()
