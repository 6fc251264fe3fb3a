"""Escape suite: attacks an agent could run through `bash`, each against the bwrap sandbox.

Every attack must be contained (the host is untouched), bounded in time, and leave no process
behind. No test sends traffic anywhere but loopback: the "outside network" attack first checks
that the sandbox has no route at all and only then tries to connect (to a TEST-NET address,
which could not leave the empty network namespace anyway).
"""

import os
import socket
import threading
import time

import pytest

from agentgym.envs.swe.sandbox import Limits
from agentgym.envs.swe.sandbox_bwrap import BwrapSandbox
from agentgym.envs.swe.tools import view
from agentgym.envs.swe.workspace import PathError

pytestmark = pytest.mark.sandbox

LIMITS = Limits(timeout=5, max_timeout=10, cpu_seconds=10, memory_bytes=512 << 20, processes=64,
                file_size_bytes=8 << 20, workspace_bytes=32 << 20, tmp_bytes=16 << 20, output_bytes=256 << 10)


@pytest.fixture
def sandbox(workspace):
    sb = BwrapSandbox(workspace, LIMITS)
    yield sb
    leftovers = _processes_of(sb.uid)
    assert not leftovers, f"processes left behind: {leftovers}"


def _proc_table():
    """pid -> (ppid, real uid, state, name) for every live process on the host, from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        table[int(entry)] = (int(fields["PPid"]), int(fields["Uid"].split()[0]), fields["State"].split()[0],
                             fields["Name"].strip())
    return table


def _processes_of(uid):
    return [(pid, name) for pid, (_, u, state, name) in _proc_table().items() if u == uid and state != "Z"]


def _children_now():
    table = _proc_table()
    mine, frontier = set(), {os.getpid()}
    while frontier:
        kids = {pid for pid, (ppid, *_rest) in table.items() if ppid in frontier} - mine
        mine |= kids
        frontier = kids
    return [pid for pid in mine if table[pid][2] != "Z"]


def run(sb, cmd, timeout=None):
    before = set(_children_now())
    start = time.monotonic()
    res = sb.run(cmd, timeout=timeout)
    elapsed = time.monotonic() - start
    assert elapsed < (timeout or LIMITS.timeout) + 5, f"the command was not bounded in time ({elapsed:.1f}s)"
    after = [c for c in _children_now() if c not in before]
    assert not after, f"child processes survived the command: {after}"
    return res


# --- network -----------------------------------------------------------------------------------

def test_no_route_to_the_outside(sandbox):
    script = (
        "import socket\n"
        "routes = [l for l in open('/proc/net/route').read().splitlines()[1:] if l.strip()]\n"
        "if routes: print('ROUTES', routes); raise SystemExit\n"
        "try:\n"
        "    socket.create_connection(('192.0.2.1', 80), timeout=2); print('CONNECTED')\n"
        "except OSError as e: print('BLOCKED', e.errno)\n"
    )
    res = run(sandbox, f"python -c \"{script}\"")
    assert "BLOCKED" in res.output and "ROUTES" not in res.output and "CONNECTED" not in res.output


def test_only_loopback_interface(sandbox):
    res = run(sandbox, "cat /proc/net/dev")
    ifaces = {line.split(":")[0].strip() for line in res.output.splitlines() if ":" in line}
    assert ifaces <= {"lo"}, ifaces


def test_host_loopback_server_unreachable(sandbox):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(3)
    port = server.getsockname()[1]
    accepted = []
    t = threading.Thread(target=lambda: accepted.append(_try_accept(server)))
    t.start()
    res = run(sandbox, f"python -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('CONNECTED')\"")
    t.join()
    server.close()
    assert "CONNECTED" not in res.output
    assert accepted == [None]


def _try_accept(server):
    try:
        conn, _ = server.accept()
        conn.close()
        return "accepted"
    except OSError:
        return None


def test_dns_does_not_resolve(sandbox):
    res = run(sandbox, "python -c \"import socket; print(socket.gethostbyname('pypi.org'))\"")
    assert res.exit_code != 0


# --- reading outside the workspace -------------------------------------------------------------

def test_cannot_read_shadow_or_host_etc(sandbox):
    res = run(sandbox, "cat /etc/shadow; cat /etc/passwd; ls /etc")
    assert "root:" not in res.output
    assert res.exit_code != 0


def test_host_home_is_not_visible(sandbox):
    res = run(sandbox, "ls -A /root; ls -A /root/.pyenv; cat /root/.bash_history /root/.ssh/id_rsa 2>&1")
    lines = [l for l in res.output.splitlines() if l and not l.startswith("cat:")]
    # only the read-only interpreter path exists under /root
    assert set(lines) <= {".pyenv", "versions"}, lines


def test_host_files_outside_workspace_invisible(sandbox, tmp_path):
    canary = tmp_path / "canary.txt"
    canary.write_text("HOST-SECRET")
    res = run(sandbox, f"cat {canary}; grep -r HOST-SECRET /tmp /work 2>/dev/null | head -3")
    assert "HOST-SECRET" not in res.output


def test_host_proc_is_not_visible(sandbox):
    os.environ["AGENTGYM_CANARY"] = "HOST-ENV-SECRET"
    try:
        res = run(sandbox, "ls /proc | grep -E '^[0-9]+$' | wc -l; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c CANARY; env")
    finally:
        del os.environ["AGENTGYM_CANARY"]
    count = int(res.output.split()[0])
    assert count < 10, f"{count} processes visible: the PID namespace is not private"
    assert "HOST-ENV-SECRET" not in res.output


def test_no_devices_or_sys(sandbox):
    res = run(sandbox, "ls /sys 2>&1; ls /dev; cat /dev/vda /dev/sda 2>&1 | head -c 100")
    assert "block" not in res.output and "vda" not in res.output.split("cat:")[0]


# --- writing outside the workspace -------------------------------------------------------------

@pytest.mark.parametrize("target", ["/usr/pwned", "/etc/pwned", "/.agentgym/src/pwned", "/pwned", "/proc/pwned"])
def test_cannot_write_outside(sandbox, workspace, target):
    res = run(sandbox, f"echo x > {target} && echo WROTE")
    assert "WROTE" not in res.output
    assert not os.path.exists(target)
    assert not (workspace / "pwned").exists()


def test_cannot_write_interpreter(sandbox):
    import sys

    venv_file = os.path.join(sys.prefix, "pwned")
    res = run(sandbox, f"touch {venv_file} && echo WROTE; python -c \"import pytest, os; open(os.path.join(os.path.dirname(pytest.__file__), 'x'), 'w')\"")
    assert "WROTE" not in res.output and not os.path.exists(venv_file)


def test_not_root_and_no_privilege_gain(sandbox):
    res = run(sandbox, "id -u; unshare -r true && echo UNSHARED; cat /proc/self/status | grep NoNewPrivs")
    assert res.output.split()[0] != "0"
    assert "UNSHARED" not in res.output
    assert "NoNewPrivs:\t1" in res.output


# --- symlink and .. escapes ----------------------------------------------------------------------

def test_symlink_escape_is_dropped(sandbox, workspace, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("HOST-SECRET")
    res = run(sandbox, f"ln -s {secret} leak; ln -s /etc/passwd pw; ln -s ../.. up; ln -s pkg/mod.py ok; ls")
    assert "leak" in res.output
    assert not (workspace / "leak").exists() and not (workspace / "up").is_symlink()
    assert (workspace / "ok").is_symlink()  # links inside the workspace are kept
    with pytest.raises(PathError):
        view(workspace, "leak")


def test_dotdot_stays_in_sandbox(sandbox):
    res = run(sandbox, "cat ../../../../../etc/shadow; cd ../../..; pwd; ls")
    assert res.output.count("workspace") <= 1 and "root:" not in res.output


# --- resource exhaustion -------------------------------------------------------------------------

def test_fork_bomb_is_contained(sandbox):
    res = run(sandbox, ":(){ :|:& };:", timeout=4)
    assert res.timed_out or res.exit_code is not None
    assert os.path.exists(f"/proc/{os.getpid()}")


def test_memory_bomb_fails(sandbox):
    res = run(sandbox, "python -c \"x = bytearray(4 << 30); print('ALLOCATED')\"")
    assert "ALLOCATED" not in res.output and "MemoryError" in res.output


def test_infinite_loop_times_out(sandbox):
    start = time.monotonic()
    res = run(sandbox, "while true; do :; done", timeout=2)
    assert res.timed_out and time.monotonic() - start < 5


def test_sleep_past_timeout_is_killed(sandbox):
    res = run(sandbox, "sleep 100; echo WOKE", timeout=1.5)
    assert res.timed_out and "WOKE" not in res.output
    assert res.duration < 4


def test_output_flood_is_capped(sandbox):
    start = time.monotonic()
    res = run(sandbox, "yes AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
    assert res.output_capped and len(res.output) <= LIMITS.output_bytes
    assert time.monotonic() - start < LIMITS.timeout


def test_disk_fill_is_bounded(sandbox, workspace):
    res = run(sandbox, "dd if=/dev/zero of=big bs=1M count=100 2>&1 | tail -1; "
                       "for i in $(seq 1 10); do head -c 7M /dev/zero > f$i || break; done; "
                       "dd if=/dev/zero of=/tmp/t bs=1M count=100 2>&1 | tail -1; du -sh /workspace /tmp")
    total = sum(p.stat().st_size for p in workspace.rglob("*") if p.is_file())
    assert total <= LIMITS.workspace_bytes + (1 << 20)
    assert all(p.stat().st_size <= LIMITS.file_size_bytes for p in workspace.rglob("*") if p.is_file())


def test_killing_the_parent_only_ends_the_command(sandbox):
    res = run(sandbox, "kill -9 $PPID; kill -9 -1; kill -9 1; echo after")
    assert os.path.exists(f"/proc/{os.getpid()}")
    res2 = run(sandbox, "echo still-works")
    assert res2.output.strip() == "still-works"


def test_background_processes_do_not_outlive_the_command(sandbox, workspace):
    run(sandbox, "nohup sleep 1000 >/dev/null 2>&1 & setsid sleep 1000 & (sleep 1000 &) ; "
                 "(sleep 2; echo late > late.txt) & disown; echo started")
    time.sleep(3)
    assert not (workspace / "late.txt").exists()
    assert not _processes_of(sandbox.uid)


def test_cpu_rlimit_applies(sandbox):
    res = run(sandbox, "ulimit -t; ulimit -u; ulimit -f")
    values = res.output.split()
    assert values[0] == str(LIMITS.cpu_seconds)
    assert values[1] == str(LIMITS.processes)
