"""Round 5 (issue 69 item 7): scripts/setup.sh and another apt process holding apt's lock.

scripts/system_packages.sh (setup.sh's apt step) runs here against a stand-in `apt-get` on PATH that
behaves as apt 2.6 does when another process holds a lock: `update` fails at once with rc 100 and
"Could not get lock ... held by process N (name)" (it ignores DPkg::Lock::Timeout), `install` waits
up to -o DPkg::Lock::Timeout seconds for the lock, then fails the same way."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "system_packages.sh"

FAKE_APT = r'''#!PYTHON
import os, re, sys, time
d = os.environ["FAKE_APT_DIR"]
args = sys.argv[1:]
open(os.path.join(d, "calls"), "a").write(" ".join(args) + "\n")
start = float(open(os.path.join(d, "start")).read())
def held(what):
    return time.time() - start < float(os.environ.get(what, "0"))
def locked(path):
    sys.stderr.write(f"E: Could not get lock {path}. It is held by process 4242 (unattended-upgr)\n")
    sys.exit(100)
if "update" in args:
    if held("LISTS_HELD_S"):
        locked("/var/lib/apt/lists/lock")
    sys.exit(0)
if "install" in args:
    timeout = 0.0
    for a, b in zip(args, args[1:]):
        m = re.fullmatch(r"DPkg::Lock::Timeout=(\d+)", b) if a == "-o" else None
        if m:
            timeout = float(m.group(1))
    give_up = time.time() + timeout
    while held("DPKG_HELD_S") and time.time() < give_up:
        time.sleep(0.05)
    if held("DPKG_HELD_S"):
        locked("/var/lib/dpkg/lock-frontend")
    open(os.path.join(d, "installed"), "w").write(" ".join(a for a in args if not a.startswith("-") and a not in ("install", "DPkg::Lock::Timeout")))
    sys.exit(0)
sys.exit(1)
'''


def _run(tmp_path: Path, lists_held_s: float, dpkg_held_s: float, wait_s: int):
    """system_packages.sh as root with bubblewrap missing, apt's locks held for the given seconds."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    apt = bin_dir / "apt-get"
    apt.write_text(FAKE_APT.replace("PYTHON", sys.executable))
    apt.chmod(0o755)
    fake_id = bin_dir / "id"
    fake_id.write_text("#!/bin/sh\necho 0\n")  # as root (the script installs only then)
    fake_id.chmod(0o755)
    for tool in ("bash", "date", "sleep", "sed", "grep", "head", "tail", "cat"):  # no bwrap on this PATH
        found = next((Path(p) / tool for p in ("/usr/bin", "/bin") if (Path(p) / tool).exists()), None)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    (tmp_path / "start").write_text(str(time.time()))
    env = {"PATH": str(bin_dir), "FAKE_APT_DIR": str(tmp_path), "LISTS_HELD_S": str(lists_held_s),
           "DPKG_HELD_S": str(dpkg_held_s), "AGENTGYM_APT_WAIT_S": str(wait_s), "AGENTGYM_APT_POLL_S": "0.2",
           "HOME": str(tmp_path)}
    t0 = time.time()
    done = subprocess.run([str(bin_dir / "bash"), str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    calls = (tmp_path / "calls").read_text().splitlines() if (tmp_path / "calls").exists() else []
    return done, calls, time.time() - t0


def test_round5_apt_lock_held_for_a_while_is_waited_for(tmp_path):
    """Round 5, issue 69 item 7: apt's lock held by another process for 1.5 s made setup.sh fail at
    once with rc 100; it waits for the lock (update retried, install with DPkg::Lock::Timeout) and installs."""
    done, calls, _ = _run(tmp_path, lists_held_s=1.5, dpkg_held_s=2.5, wait_s=30)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    updates = [c for c in calls if "update" in c.split()]
    installs = [c for c in calls if "install" in c.split()]
    assert len(updates) >= 2, calls  # retried while the lists lock was held
    assert len(installs) == 1 and "DPkg::Lock::Timeout=" in installs[0], installs
    assert "bubblewrap" in (tmp_path / "installed").read_text()


def test_round5_apt_lock_never_released_is_one_line_after_the_bound(tmp_path):
    """Round 5, issue 69 item 7: a lock that is never released ends the wait at the bound with one
    line naming the process holding it and what to do; the set-up goes on (the packages are optional)."""
    for lists, dpkg in ((1000, 0), (0, 1000)):  # the lists lock (apt-get update), then dpkg's (install)
        case = tmp_path / f"lists{lists}"
        case.mkdir()
        done, calls, took = _run(case, lists_held_s=lists, dpkg_held_s=dpkg, wait_s=2)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 0 and len(lines) == 1, done.stderr
        step = "apt-get update" if lists else "apt-get install"
        assert lines[0].startswith(f"setup: {step} failed: apt's lock was held by process 4242 (unattended-upgr) "
                                   "for more than 2 s"), lines
        assert "bubblewrap" in lines[0] and "run scripts/setup.sh again" in lines[0]
        assert 1.0 <= took < 20 and not (case / "installed").exists()


def test_round5_setup_sh_uses_the_waiting_apt_step():
    """Round 5, issue 69 item 7: setup.sh calls apt only through system_packages.sh (the step that waits)."""
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    code = [line for line in setup.splitlines() if not line.strip().startswith("#")]
    assert any("scripts/system_packages.sh" in line for line in code)
    assert not any("apt-get" in line for line in code)


# --- item 22: a config file linked to a secret -------------------------------------------------------
SECRETS = {  # what a link named like a config may point at, and the text that must never be printed
    "id_ed25519": ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAsecretbody\n", "b3BlbnNzaC1rZXkt"),
    ".env": ("OPENAI_API_KEY: sk-live-5ecret\n", "sk-live-5ecret"),
    "token.json": ('{"token": "ghp_5ecretToken"}\n', "ghp_5ecretToken"),
    "credentials": ("[default]\naws_secret_access_key = AKIA5ECRET\n", "AKIA5ECRET"),
    "kubeconfig": ("apiVersion: v1\nkind: Config\nusers:\n- user: {token: kube-5ecret}\n", "kube-5ecret"),
    "tagged": ("a: !vault kube-5ecret-tag\n", "kube-5ecret-tag"),
    "broken": ("name: [sk-5ecret-flow\n", "sk-5ecret-flow"),
    "tabbed": ("a: 1\n\tsk-5ecret-tab: 2\n", "sk-5ecret-tab"),
}


def test_round5_a_config_linked_to_a_secret_names_the_file_never_its_content(tmp_path):
    """Round 5, item 22: a config file symlinked to a secret file echoed the file's first line in its
    error; the error names the file (the link) and shows none of its text."""
    from agentgym.errors import ConfigError
    from agentgym.trainers.config import load_config

    import pytest

    for name, (content, secret) in SECRETS.items():
        target = tmp_path / "home" / name
        target.parent.mkdir(exist_ok=True)
        target.write_text(content)
        link = tmp_path / f"{name.strip('.')}.yaml"
        link.symlink_to(target)
        with pytest.raises(ConfigError) as err:
            load_config(str(link))
        message = str(err.value)
        assert str(link) in message and "\n" not in message, (name, message)
        assert secret not in message and content.splitlines()[0] not in message, (name, message)
    # the command line prints the same one line
    done = subprocess.run([sys.executable, "-m", "agentgym.cli", "train", str(tmp_path / "env.yaml"), "--print-config"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "sk-live-5ecret" not in done.stdout + done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and str(tmp_path / "env.yaml") in done.stderr


def test_round5_a_real_configs_typos_are_still_named(tmp_path):
    """Round 5, item 22: hiding a foreign file's text keeps the help a config's own mistakes get."""
    from agentgym.errors import ConfigError
    from agentgym.trainers.config import load_config

    import pytest

    config = tmp_path / "mine.yaml"
    config.write_text("iteratons: 3\n")
    with pytest.raises(ConfigError, match="did you mean iterations"):
        load_config(str(config))
    config.write_text("seed: 1\niteratons: 3\n")  # a config (seed) with a typo: the key is named
    with pytest.raises(ConfigError, match="unknown key iteratons: did you mean iterations"):
        load_config(str(config))
    config.write_text("iterations: 3\n\tseed: 1\n")
    # libyaml's words ("found a tab character ...") or the pure-Python parser's ("found character '\t' ...")
    with pytest.raises(ConfigError, match=r"not valid YAML at line 2, column 1 \(found (a tab|character '\\t')"):
        load_config(str(config))


# --- item 22: the disk filling up while a GGUF model is converted ------------------------------------
FULL_DISK = 'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'


def test_round5_a_full_disk_during_model_conversion_is_one_line(tmp_path, monkeypatch, capsys):
    """Round 5, item 22: the disk filling up while a GGUF model was converted gave a traceback ending
    in safetensors' SafetensorError; it is one line, and the cache keeps no partial folder. The model
    is a tiny one standing in for the file's, and safetensors' writer raises what it raises when the
    disk fills up under it."""
    import pytest

    pytest.importorskip("gguf", reason="pip install 'agentgym-credit[train]'")
    import safetensors
    import transformers
    import transformers.modeling_utils as modeling_utils

    from agentgym.cli import main
    from tests.models.test_model_catalog import CHATML, write_gguf

    net = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2))

    class Tokenizer:
        chat_template = CHATML

    def full(*args, **kwargs):
        raise safetensors.SafetensorError(FULL_DISK)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: net)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: Tokenizer())
    monkeypatch.setattr(modeling_utils, "safe_save_file", full)
    cache = tmp_path / "cache"
    monkeypatch.setenv("AGENTGYM_MODEL_CACHE", str(cache))
    source = write_gguf(tmp_path / "m.gguf")
    monkeypatch.setattr(sys, "argv", ["agentgym", "eval", "agentgym/Household-v0", "--policy", f"hf:{source}",
                                      "--episodes", "1", "--limit", "1"])
    with pytest.raises(SystemExit) as stop:
        main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: the disk is full") and "AGENTGYM_MODEL_CACHE" in last, err
    assert not [p for p in cache.rglob("*") if p.is_dir()]  # neither the folder nor its temporary
