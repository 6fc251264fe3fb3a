"""What the model-file bounds cost and stop: GGUF headers, the cache check, chat-template renders.

    python benchmarks/robustness/model_bounds.py --out docs/model_bounds.json

- the catalog model's GGUF header read by the bounded reader and by gguf's GGUFReader;
- metadata-array bombs (1 MB and 10 MB of uint8 elements): seconds and peak traced memory to refuse;
- the first check of the converted catalog model in a process (sha256 of every file) and a later one;
- one prompt rendered by transformers' apply_chat_template and by the bounded renderer (the catalog
  model's own template, a four-message conversation), and the seconds a hostile template takes to stop.
One process, one thread; needs the catalog model installed (scripts/setup.sh) and converted.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import command  # noqa: E402

os.environ.setdefault("OMP_NUM_THREADS", "1")

MESSAGES = [{"role": "system", "content": "You clean houses."}, {"role": "user", "content": "Where is the mug?"},
            {"role": "assistant", "content": "In the cabinet."}, {"role": "user", "content": "Take it."}]
HOSTILE = {"nested range(100000) loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                                         "{% endfor %}",
           "1 GB string": "{{ 'x' * 1000000000 }}",
           "string doubled in a loop": "{% set ns = namespace(s='x') %}{% for i in range(40) %}"
                                       "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
           "4 MB text word-wrapped": "{{ ('x ' * 2000000)|wordwrap(1) }}",
           "filter over 4 million items": "{{ ('ab' * 2000000)|list|unique|list|length }}"}


def timed(fn, repeat: int = 1) -> float:
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat


def bomb(path: Path, count: int) -> Path:
    def string(s: str) -> bytes:
        return struct.pack("<Q", len(s)) + s.encode()

    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 2) + string("general.architecture") + struct.pack("<I", 8) + \
        string("llama") + string("general.bomb") + struct.pack("<IIQ", 9, 0, count) + b"\1" * count + \
        string("token_embd.weight") + struct.pack("<IQIQ", 1, 8, 0, 0)
    path.write_bytes(head + b"\0" * (-len(head) % 32) + b"\0" * 32)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("docs/model_bounds.json"))
    args = ap.parse_args()

    import gguf

    from agentgym.errors import ConfigError
    from agentgym.policies import model_catalog as mc
    from agentgym.chat_template import render_chat
    from agentgym.policies.gguf_header import read_raw_header
    from agentgym.policies.model_files import check_model_path, resolve_model

    name = "smollm2-135m-instruct"
    source = mc.catalog_file(mc.CATALOG[name])
    report: dict = {"command": command(__file__, ["--out", str(args.out)]), "model": name,
                    "cpu_threads": 1, "load_average_1min": round(os.getloadavg()[0], 1)}
    report["header_seconds"] = {"bounded_reader": round(timed(lambda: read_raw_header(source)), 3),
                                "gguf_GGUFReader": round(timed(lambda: gguf.GGUFReader(str(source))), 3)}

    bombs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, count in (("1 MB", 1_000_000), ("10 MB", 10_000_000)):
            path = bomb(Path(tmp) / f"{count}.gguf", count)
            tracemalloc.start()
            t0 = time.perf_counter()
            try:
                check_model_path(str(path))
                refused = False
            except ConfigError:
                refused = True
            bombs[label] = {"refused": refused, "seconds": round(time.perf_counter() - t0, 3),
                            "peak_traced_MiB": round(tracemalloc.get_traced_memory()[1] / 2**20, 2)}
            tracemalloc.stop()
    report["metadata_bombs"] = bombs

    folder = Path(resolve_model(name)) if mc.os.path.lexists(mc.converted_folder(source, name)) else None
    if folder is None:
        sys.exit("convert the catalog model first: agentgym eval --preset household-smol -n 1")
    mc._VERIFIED.clear()
    report["cache_check_seconds"] = {"first_in_process": round(timed(lambda: check_model_path(name)), 3),
                                     "later": round(timed(lambda: check_model_path(name)), 5),
                                     "folder_MiB": round(mc.folder_size(folder) / 2**20)}

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    assert tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False) == render_chat(tok, MESSAGES)
    report["render_ms_per_prompt"] = {
        "transformers": round(1000 * timed(lambda: tok.apply_chat_template(MESSAGES, add_generation_prompt=True,
                                                                           tokenize=False), 200), 3),
        "bounded": round(1000 * timed(lambda: render_chat(tok, MESSAGES), 200), 3)}
    stops = {}
    for label, template in HOSTILE.items():
        tok.chat_template = template
        t0 = time.perf_counter()
        try:
            render_chat(tok, MESSAGES)
            stops[label] = "rendered"
        except ConfigError as exc:
            stops[label] = {"seconds": round(time.perf_counter() - t0, 3), "message": str(exc).replace(str(folder), f"MODEL_CACHE/{folder.name}")[:200]}
    report["hostile_template_stops"] = stops
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
