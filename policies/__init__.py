"""Policies: the Policy interface, scripted policies, and (with the `train` extra) LLM backends.

LLM backends import torch and are imported from their own modules, never from here."""

from agentgym.policies.base import Completion, Policy, SamplingParams, TurnContext
from agentgym.policies.scripted import OraclePolicy, RandomPolicy

__all__ = ["Completion", "Policy", "SamplingParams", "TurnContext", "OraclePolicy", "RandomPolicy"]
