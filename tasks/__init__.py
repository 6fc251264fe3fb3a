"""Tasks: TaskSpec, split manifests, the task-space protocol (`TaskSpaceProtocol`, base class
`TaskSpace`), validation and generation functions taking a space (`agentgym.tasks.validation`,
`agentgym.tasks.generation`), the self-evolving generator and curricula."""

from agentgym.tasks.protocol import TaskSpaceProtocol
from agentgym.tasks.space import TaskSpace
from agentgym.tasks.spec import TaskSpec, canonical_json
from agentgym.tasks.splits import HELDOUT_SPLITS, load_split, refuse_heldout, save_split

__all__ = ["TaskSpec", "TaskSpace", "TaskSpaceProtocol", "canonical_json", "load_split", "save_split", "refuse_heldout",
           "HELDOUT_SPLITS"]
