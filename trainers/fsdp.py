"""FSDP2 for data-parallel training (`data_parallel: fsdp`): each rank holds 1/N of the
parameters, gradients and optimizer state, where `data_parallel: ddp` keeps a full replica
(trainers/distributed.py has the part both share: groups per rank, ghosts, rank 0's duties).

torch's `fully_shard` wraps every decoder layer and then the whole model. What changes for the
rest of the trainer:

- Rollouts, scoring and evaluation run on the full weights. `full_weights` gathers them once,
  every rank together, and keeps them until the block ends, so inside it ranks may run
  different numbers of forward passes (their episodes differ). Memory: the full weights exist
  during rollouts; gradients and AdamW's two moments (3x the weights) stay sharded for good.
- The update: FSDP gathers a layer in its forward and reduce-scatters its gradients in its
  backward, which every rank must do the same number of times. A rank with fewer micro-batches
  in a minibatch runs `filler_pass`es (a two-token sequence, zero loss) to keep step.
  Gradients are summed over ranks, not averaged: each rank's loss is already its share of the
  global loss, as with ddp.
- Checkpoints: rank 0 saves the gathered full weights as a normal HF folder; each rank saves
  its own optimizer shard, so a resume needs the same world size.

torch is imported lazily: trainers.config imports trainers.distributed, which names this module.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path


def sharded_modules(model) -> list:
    """The model's FSDP units, root last."""
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)][::-1]


def shard_model(model) -> None:
    """fully_shard each transformer block (the classes the model lists as `_no_split_modules`,
    PEFT-wrapped or not), then the root, which takes the embeddings and the head."""
    import warnings

    from torch.distributed.fsdp import fully_shard

    # HF models return views (logits, hidden states); FSDP warns that an in-place op on them would
    # skip its backward hook. The trainer only reads them out of place, so the warning is noise.
    warnings.filterwarnings("ignore", message=r"FSDP2-wrapped module .* returned a view tensor")
    blocks: set[str] = set()
    for m in model.modules():
        blocks.update(getattr(m, "_no_split_modules", None) or [])
    for m in [m for m in model.modules() if type(m).__name__ in blocks]:
        fully_shard(m)
    fully_shard(model)
    for unit in sharded_modules(model):
        # sum, not mean, over ranks; gloo has no pre-multiplied sum, so ask for a plain SUM
        unit.set_gradient_divide_factor(1.0)
        unit.set_force_sum_reduction_for_comms(True)


@contextmanager
def full_weights(model):
    """All ranks enter together (one all-gather per unit); inside, forward passes need no
    collective, so ranks may run different numbers of them; on exit every rank drops the
    gathered copy."""
    units = sharded_modules(model)
    for unit in units:
        unit.unshard()
        unit.set_reshard_after_forward(False, recurse=False)
    try:
        yield
    finally:
        for unit in units:
            # FSDP's defaults: blocks reshard after forward, the root keeps its parameters for backward
            unit.set_reshard_after_forward(unit is not units[-1], recurse=False)
            unit.reshard()


def filler_pass(policy, want_entropy: bool, use_kl: bool) -> None:
    """The collectives of one micro-batch's forward and backward with no effect on the gradients:
    for a rank that has run out of micro-batches while others have not."""
    import torch

    from agentgym.trainers.ppo import reference_logprobs, token_logprobs  # lazy: needs torch

    ids = torch.full((1, 2), policy.tokenizer.pad_token_id or 0, dtype=torch.long, device=policy.device)
    mask = torch.ones_like(ids)
    out = token_logprobs(policy.model, ids, mask, False, want_entropy=want_entropy)
    if use_kl:
        reference_logprobs(policy, ids, mask)
    (out[0].sum() * 0.0).backward()


def split_by_kind(params: list) -> tuple[list, list]:
    """(sharded DTensor parameters, plain ones such as the value head)."""
    from torch.distributed.tensor import DTensor

    sharded = [p for p in params if isinstance(p, DTensor)]
    return sharded, [p for p in params if not isinstance(p, DTensor)]


def clip_grad_norm(params: list, max_norm: float):
    """torch.nn.utils.clip_grad_norm_ over sharded and plain parameters together (torch's own
    refuses the mix): the global norm of both, one scale for both."""
    import torch

    sharded, plain = split_by_kind([p for p in params if p.grad is not None])
    norms = []
    if sharded:
        norm = torch.nn.utils.get_total_norm([p.grad for p in sharded])
        norms.append(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
    if plain:
        norms.append(torch.nn.utils.get_total_norm([p.grad for p in plain]))
    if not norms:
        return torch.tensor(0.0)
    total = torch.linalg.vector_norm(torch.stack([n.float().cpu() for n in norms]))
    for group in (sharded, plain):
        if group:
            torch.nn.utils.clip_grads_with_norm_(group, max_norm, total.to(group[0].grad.device))
    return total


def full_state_dict(model) -> dict:
    """The full weights, on CPU, on rank 0 (empty elsewhere); every rank must call it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    # tied weights (embeddings = LM head) come back as separate copies, which save_pretrained
    # would write twice: keep the first name of each shared parameter, as a normal save does
    seen: set[int] = set()
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            state.pop(name, None)
        seen.add(id(p))
    return state


def save_optimizer_shard(optimizer, path: Path) -> None:
    """This rank's part of the optimizer state, as plain tensors."""
    import torch

    state = optimizer.state_dict()
    local = {i: {k: (v.to_local() if hasattr(v, "to_local") else v) for k, v in s.items()}
             for i, s in state["state"].items()}
    torch.save({"state": local, "param_groups": state["param_groups"]}, path)


def load_optimizer_shard(optimizer, path: Path) -> None:
    """Inverse of save_optimizer_shard: the plain tensors become shards of this run's
    parameters again (same world size, same layout)."""
    import torch
    from torch.distributed.tensor import DTensor

    from agentgym.trainers.checkpoint import safe_load  # lazy: needs torch

    blob = safe_load(path, "optimizer shard")
    params = [p for g in optimizer.param_groups for p in g["params"]]
    state = {}
    for i, s in blob["state"].items():
        p = params[int(i)]
        state[i] = {k: (DTensor.from_local(v, p.device_mesh, p.placements, shape=p.shape, stride=p.stride(),
                                           run_check=False)
                        if isinstance(p, DTensor) and torch.is_tensor(v) and v.dim() > 0 else v)
                    for k, v in s.items()}
    optimizer.load_state_dict({"state": state, "param_groups": blob["param_groups"]})
