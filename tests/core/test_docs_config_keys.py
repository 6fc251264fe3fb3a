"""Every config key the README and docs/ quote as an override (`section.key=value`) is a key the
config has, so that a line a user copies from the docs fails on its value at the worst, never with
"unknown key". Values are not checked here: the docs quote placeholders (`ppo.lr=...`) and
combinations that need other keys beside them."""

import dataclasses
import re
from pathlib import Path

import pytest

from agentgym.errors import ConfigError
from agentgym.trainers.config import TrainConfig, load_config
from agentgym.trainers.estimators import ESTIMATORS

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = sorted(f.name for f in dataclasses.fields(TrainConfig))
OVERRIDE = re.compile(r"(?<![\w./-])((?:%s)\.[A-Za-z_][\w.]*)=" % "|".join(SECTIONS))


def quoted_keys() -> dict[str, str]:
    """{key: the first file that quotes it}, over the README and docs/*.md."""
    keys: dict[str, str] = {}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for key in OVERRIDE.findall(path.read_text(encoding="utf-8")):
            keys.setdefault(key.rstrip("."), path.name)
    return keys


def unknown_key_error(key: str) -> str | None:
    """The loader's error when `key` is not a config key; None when it is (whatever it says of a
    placeholder value). An estimator option is a key when some estimator declares it."""
    if key.startswith("estimator.options."):
        option = key.split(".", 2)[2]
        owners = [name for name, spec in ESTIMATORS.items() if option in spec.options]
        return None if owners else f"no estimator declares the option {option!r}"
    try:
        load_config("household-tiny", [f"{key}=1"])
    except (ConfigError, SystemExit) as e:
        return str(e) if str(e).startswith("unknown key") else None
    return None


def test_the_docs_quote_overrides():
    assert len(quoted_keys()) > 50  # the pattern still finds the docs' overrides


@pytest.mark.parametrize("key,where", sorted(quoted_keys().items()))
def test_each_quoted_override_is_a_config_key(key, where):
    assert unknown_key_error(key) is None, f"{where} quotes {key}=..., which the config does not have"


def test_a_misspelt_key_is_found():
    assert "did you mean ppo.lr" in unknown_key_error("ppo.lrr")
    assert "did you mean env.chat.history" in unknown_key_error("env.chat.histry")
    assert unknown_key_error("estimator.options.clip_hihg") is not None
    assert unknown_key_error("estimator.options.clip_high") is None
