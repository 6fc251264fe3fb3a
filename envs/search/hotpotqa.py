"""Convert HotpotQA-style JSON into SearchQA's corpus and question JSONL files.

HotpotQA files (e.g. hotpot_dev_distractor_v1.json, which you download yourself) hold a list of
{"_id", "question", "answer", "type", "level", "supporting_facts": [[title, sentence_index], ...],
 "context": [[title, [sentence, ...]], ...]}. Every context paragraph becomes one document whose
id is its title; each question's supporting documents are the titles of its supporting facts.

    python -m agentgym.envs.search.hotpotqa hotpot_dev_distractor_v1.json data/hotpot
    env = gym.make("agentgym/SearchQA-v0", corpus_path="data/hotpot/corpus.jsonl",
                   questions_path="data/hotpot/questions.jsonl")
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agentgym.errors import ConfigError


def convert_hotpotqa(source: str | Path, out_dir: str | Path, split: str = "") -> tuple[Path, Path]:
    """Write out_dir/corpus.jsonl and out_dir/questions.jsonl; returns their paths.

    split: "" (held-out ids chosen by hash), or a split name given to every question
    ("heldout" for a dev file you only evaluate on)."""
    source = Path(source)
    try:
        examples = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read HotpotQA file {source}: {exc}") from None
    if not isinstance(examples, list):
        raise ConfigError(f"{source} is not a HotpotQA file: expected a JSON list of examples")
    documents: dict[str, str] = {}
    questions = []
    for i, ex in enumerate(examples):
        try:
            for title, sentences in ex["context"]:
                text = "".join(sentences).strip()
                # The same Wikipedia paragraph appears in many examples; keep its first version.
                documents.setdefault(str(title), text)
            supporting = list(dict.fromkeys(str(title) for title, _ in ex.get("supporting_facts", [])))
            record = {"id": str(ex["_id"]), "question": ex["question"], "answer": ex["answer"],
                      "supporting": supporting, "type": ex.get("type", "qa")}
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: example {i} is not a HotpotQA example "
                              f"({type(exc).__name__}: {exc})") from None
        if split:
            record["split"] = split
        questions.append(record)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    corpus_path, questions_path = out_dir / "corpus.jsonl", out_dir / "questions.jsonl"
    with corpus_path.open("w", encoding="utf-8") as f:
        for title, text in documents.items():
            f.write(json.dumps({"id": title, "title": title, "text": text}, ensure_ascii=False) + "\n")
    with questions_path.open("w", encoding="utf-8") as f:
        for record in questions:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return corpus_path, questions_path


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: python -m agentgym.envs.search.hotpotqa HOTPOT.json OUT_DIR [split]")
    paths = convert_hotpotqa(*sys.argv[1:])
    print("wrote", *paths)
