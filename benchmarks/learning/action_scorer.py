"""A fast controlled learner for credit-assignment benchmarks: a small neural action scorer.

Not an LLM. It reads the same prompt an LLM would (the task instruction, the ChatEnv memory
line "Your actions so far: ...", the current observation) and the env's admissible actions,
and scores each action; the policy is the softmax over the admissible actions. Its log-prob
of the chosen action plays the role of the LLM's response log-prob: a single "token" with
loss mask 1, so the trainer's own `ppo_clip_loss` and the trainer's own advantage estimators
(`compute_advantages` on real `Trajectory` objects from `agentgym.collect`) train it.

Features (hashed into `buckets` ids, summed by an EmbeddingBag):
* state: instruction words, observation words and bigrams, the verbs and nouns of remembered
  actions, the last action, and what the memory implies (the object held, whether it was
  heated / cooled / cleaned, how many goal objects were placed);
* action: its words, verb, verb x noun, and crosses with the state that a transformer would
  compute by attention (does the action name the goal object or the goal receptacle, was this
  exact action or this place already in the memory, is its object in the current observation,
  the task type x verb).
Scorer: state MLP -> h (hidden), action embedding -> e, score = MLP([h, e, h * e]). A value
head (PPO/GAE) reads h detached, as the LLM trainer's ValueHead reads the last hidden state;
the SPA progress head reads the step's [h, e_chosen] (detached), as the LLM trainer reads the
hidden state at the end of the step's response.
"""

from __future__ import annotations

import re
import warnings
import zlib
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import torch
from torch import nn

from agentgym.policies.base import Completion, Messages, SamplingParams, TurnContext

warnings.filterwarnings("ignore", message="index_reduce")
MEMORY_PREFIX = "Your actions so far:"
_WORD = re.compile(r"[a-z]+|\d+")
TASK_WORDS = ("hot", "heat", "clean", "cool", "cold", "two", "look", "light", "lamp")
_PREPS = ("to", "from", "with", "in", "on", "at", "under")
_VERBS = ("go", "open", "close", "take", "move", "put", "heat", "cool", "clean", "use", "examine", "look", "inventory")


def _h(s: str, buckets: int) -> int:
    return zlib.crc32(s.encode()) % buckets


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def memory_entries(prompt: Messages) -> list[str]:
    """The ChatEnv memory line of a windowed prompt, split into its entries (oldest first)."""
    text = prompt[-1]["content"] if prompt else ""
    for line in text.splitlines():
        if line.startswith(MEMORY_PREFIX):
            body = line[len(MEMORY_PREFIX):].strip().rstrip(".")
            return [] if body == "none" else [e.strip() for e in body.split(";") if e.strip()]
    return []


@lru_cache(maxsize=65536)
def _split_action(action: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """verb, the entities named ("apple 1", "countertop 1"), and their nouns ("apple", "countertop")."""
    ws = words(action.replace("(nothing happened)", ""))
    verb = ws[0] if ws else ""
    ents, nouns, seg = [], [], []
    for w in ws[1:] + ["to"]:
        if w in _PREPS:
            if seg:
                noun = " ".join(x for x in seg if not x.isdigit())
                if noun:
                    nouns.append(noun)
                    ents.append(" ".join(seg))
            seg = []
        else:
            seg.append(w)
    return verb, tuple(ents), tuple(nouns)


@dataclass
class StateView:
    instruction: str
    observation: str
    memory: list[str]
    goal_words: frozenset = field(default_factory=frozenset)


def state_view(prompt: Messages, ctx: TurnContext | None, info: dict | None = None) -> StateView:
    info = info if info is not None else (ctx.info if ctx is not None else {})
    text = prompt[-1]["content"] if prompt else ""
    instruction = info.get("instruction") or (text.split("\n", 1)[0].replace("Your task:", "").strip())
    observation = info.get("env_observation", "")
    ws = set(words(instruction)) - {"put", "a", "some", "in", "on", "and", "it", "the", "at", "under", "look", "two"}
    return StateView(instruction, observation, memory_entries(prompt), frozenset(ws))


def _memory_facts(memory: list[str]) -> list[str]:
    """What the memory implies: held object, processed (heated/cooled/cleaned) objects, placements."""
    held, done, placed, lamp_on, places = None, set(), 0, False, 0
    for entry in memory:
        if entry.endswith("(nothing happened)"):
            continue
        verb, ents, nouns = _split_action(entry)
        if verb == "take" and nouns:
            held = nouns[0]
        elif verb in ("move", "put") and nouns:
            held, placed = None, placed + 1
        elif verb in ("heat", "cool", "clean") and nouns:
            done.add(verb)
        elif verb == "use":
            lamp_on = True
        elif verb == "go":
            places += 1
    facts = [f"held:{held}" if held else "held:none", f"placed:{min(placed, 2)}", f"lamp:{lamp_on}",
             f"nmem:{min(len(memory) // 4, 6)}"]
    facts += [f"done:{d}" for d in sorted(done)]
    return facts, held, done


def state_features(view: StateView, buckets: int) -> tuple[list[int], dict]:
    toks = [f"i:{w}" for w in words(view.instruction)]
    ow = words(view.observation)
    toks += [f"o:{w}" for w in ow] + [f"o2:{a}_{b}" for a, b in zip(ow, ow[1:])]
    for entry in view.memory:
        verb, _, nouns = _split_action(entry)
        toks += [f"m:{verb}"] + [f"m:{verb}:{n}" for n in nouns]
        if entry.endswith("(nothing happened)"):
            toks.append("m:invalid")
    if view.memory:
        verb, _, nouns = _split_action(view.memory[-1])
        toks += [f"last:{verb}"] + [f"last:{verb}:{n}" for n in nouns]
    facts, held, done = _memory_facts(view.memory)
    task_kw = [w for w in words(view.instruction) if w in TASK_WORDS]
    toks += facts + [f"{f}|{k}" for f in facts for k in task_kw]
    if held is not None:
        toks.append(f"heldgoal:{held in view.goal_words}")
    toks.append("bias")
    ctx = {"held": held, "done": done, "task_kw": task_kw, "facts": facts,
           "tried": {e for e in view.memory}, "visited": {_split_action(e)[1][0] for e in view.memory
                                                            if _split_action(e)[0] == "go" and _split_action(e)[1]},
           "obs": view.observation.lower(), "goal": view.goal_words}
    return [_h(t, buckets) for t in toks], ctx


def action_features(action: str, ctx: dict, buckets: int) -> list[int]:
    verb, ents, nouns = _split_action(action)
    toks = [f"a:{verb}"] + [f"a:{w}" for w in words(action)] + [f"a:{verb}:{n}" for n in nouns]
    goal_hits = [n in ctx["goal"] or any(p in ctx["goal"] for p in n.split()) for n in nouns]
    tried = action in ctx["tried"]
    visited = verb == "go" and bool(ents) and ents[0] in ctx["visited"]
    in_obs = bool(ents) and ents[0] in ctx["obs"]
    flags = [f"goal0:{goal_hits[0] if goal_hits else None}", f"goal1:{goal_hits[1] if len(goal_hits) > 1 else None}",
             f"tried:{tried}", f"visited:{visited}", f"inobs:{in_obs}"]
    toks += [f"x:{verb}:{f}" for f in flags]
    toks += [f"x:{verb}:{f}:{g}" for f in flags for g in ctx["facts"]]
    toks += [f"x:{verb}:{k}" for k in ctx["task_kw"]] + [f"x:{verb}:{n}:{k}" for n in nouns for k in ctx["task_kw"]]
    toks += [f"x:{verb}:{f}:{k}" for f in flags for k in ctx["task_kw"]]
    return [_h(t, buckets) for t in toks]


class ActionScorer(nn.Module):
    def __init__(self, buckets: int = 1 << 15, dim: int = 32, hidden: int = 64):
        super().__init__()
        self.buckets = buckets
        self.state_emb = nn.EmbeddingBag(buckets, dim, mode="sum")
        self.action_emb = nn.EmbeddingBag(buckets, dim, mode="sum")
        for emb in (self.state_emb, self.action_emb):
            nn.init.normal_(emb.weight, std=0.05)
        self.state_mlp = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh())
        self.action_proj = nn.Linear(dim, hidden)
        self.score = nn.Sequential(nn.Linear(3 * hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        self.hidden_size = hidden

    @staticmethod
    def _bag(ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        flat = torch.tensor([i for row in ids for i in row], dtype=torch.long)
        offsets = torch.tensor(np.cumsum([0] + [len(r) for r in ids[:-1]]), dtype=torch.long)
        return flat, offsets

    def forward(self, batch: "Batch"):
        """-> (log-softmax over each state's actions as one flat tensor, state hidden h [S, H],
        action hidden e [A, H]); batch.owner[a] = the state index of action a."""
        h = self.state_mlp(self.state_emb(*batch.state_bag))
        e = self.action_proj(self.action_emb(*batch.action_bag))
        hs = h[batch.owner]
        logits = self.score(torch.cat([hs, e, hs * e], -1)).squeeze(-1)
        # log-softmax within each state's segment
        mx = torch.zeros(len(batch.counts)).index_reduce_(0, batch.owner, logits.detach(), "amax", include_self=False)
        z = torch.exp(logits - mx[batch.owner])
        denom = torch.zeros(len(batch.counts)).index_add_(0, batch.owner, z)
        logp = logits - mx[batch.owner] - torch.log(denom)[batch.owner]
        return logp, h, e


@dataclass
class Batch:
    state_bag: tuple
    action_bag: tuple
    owner: torch.Tensor
    counts: list[int]
    starts: np.ndarray


@dataclass
class Decision:
    """What the scorer saw at one step: enough to recompute its log-probs after an update."""
    state_ids: list[int]
    action_ids: list[list[int]]
    actions: list[str]
    chosen: int = -1


def make_batch(decisions: list[Decision]) -> Batch:
    counts = [len(d.actions) for d in decisions]
    owner = torch.repeat_interleave(torch.arange(len(decisions)), torch.tensor(counts))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return Batch(ActionScorer._bag([d.state_ids for d in decisions]),
                 ActionScorer._bag([a for d in decisions for a in d.action_ids]), owner, counts, starts)


def decide(scorer: ActionScorer, prompt: Messages, ctx: TurnContext | None, actions: list[str],
           info: dict | None = None) -> Decision:
    view = state_view(prompt, ctx, info)
    sids, sctx = state_features(view, scorer.buckets)
    return Decision(sids, [action_features(a, sctx, scorer.buckets) for a in actions], list(actions))


class ScorerPolicy:
    """agentgym Policy: samples (or, greedy=True, takes the argmax of) the scorer's softmax over
    `info["admissible_actions"]`. Every decision is kept in `records[(episode, turn)]` with the
    chosen action's log-prob in the Completion (response_logprobs=[logp], response_ids=[index]),
    so a trainer can recompute log-probs of the same decisions later."""

    def __init__(self, scorer: ActionScorer, seed: int = 0, greedy: bool = False, record: bool = True):
        self.scorer = scorer
        self.rng = np.random.default_rng(seed)
        self.greedy = greedy
        self.record = record
        self.records: dict[tuple[str, int], Decision] = {}

    def generate(self, prompts: list[Messages], sampling: SamplingParams | None = None,
                 contexts: list[TurnContext] | None = None) -> list[Completion]:
        if contexts is None:
            raise ValueError("ScorerPolicy needs the rollout contexts (admissible actions)")
        decisions = []
        for prompt, ctx in zip(prompts, contexts):
            actions = list(ctx.info.get("admissible_actions") or ["look"])
            decisions.append(decide(self.scorer, prompt, ctx, actions))
        with torch.no_grad():
            logp, _, _ = self.scorer(make_batch(decisions))
        logp = logp.numpy()
        batch_starts = np.concatenate([[0], np.cumsum([len(d.actions) for d in decisions])[:-1]])
        out = []
        for d, ctx, start in zip(decisions, contexts, batch_starts):
            lp = logp[start:start + len(d.actions)]
            if self.greedy:
                k = int(np.argmax(lp))
            else:
                p = np.exp(lp - lp.max())
                k = int(self.rng.choice(len(p), p=p / p.sum()))
            d.chosen = k
            if self.record:
                self.records[(ctx.episode, ctx.turn)] = d
            text = ctx.format_action(d.actions[k]) if ctx.format_action else d.actions[k]
            out.append(Completion(text=text, response_ids=[k], response_logprobs=[float(lp[k])]))
        return out


def chosen_logprobs(scorer: ActionScorer, decisions: list[Decision]):
    """(log pi(chosen | state) [N], state hidden h [N, H], chosen action hidden e [N, H])."""
    batch = make_batch(decisions)
    logp, h, e = scorer(batch)
    idx = torch.tensor(batch.starts + np.array([d.chosen for d in decisions]), dtype=torch.long)
    return logp[idx], h, e[idx]
