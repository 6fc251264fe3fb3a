"""Old import path (kept for one release): the batch producer lives in trainers/batches.py and its
config rules in trainers/checks.py."""

from agentgym.trainers.batches import (AsyncRollouts, BatchProducer, RolloutBatch, check_staleness,  # noqa: F401
                                       make_rollout_copy, mark_partial, off_policy_kwargs, staleness_metrics)
from agentgym.trainers.checks import DEFAULT_IS_CAP  # noqa: F401
from agentgym.trainers.checks import check_async as validate_async_config  # noqa: F401
from agentgym.trainers.checks import rollouts_ahead as uses_engine  # noqa: F401
