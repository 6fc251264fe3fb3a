"""A method's own options: declared with their defaults on its EstimatorSpec, overridden by the user.

    estimator.name=dapo estimator.options.clip_high=0.3 estimator.options.overlong_max=32

An override of an option the method does not declare, or of a different type than its default,
is refused in one line naming the options it has.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from agentgym.errors import ConfigError


def resolve_options(spec: Any, overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """The declared defaults of `spec.options` updated with `overrides`, each checked."""
    declared = dict(getattr(spec, "options", None) or {})
    out = dict(declared)
    for key, value in (overrides or {}).items():
        if key not in declared:
            have = ", ".join(sorted(declared)) or "none"
            raise ConfigError(f"estimator {spec.name!r} has no option {key!r}: its options are {have}")
        default = declared[key]
        if isinstance(default, bool) or isinstance(value, bool):
            if not isinstance(value, bool) or not isinstance(default, bool):
                raise ConfigError(f"estimator option {key}={value!r} must be true or false")
        elif isinstance(default, (int, float)) or (default is None and isinstance(value, (int, float))):
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"estimator option {key}={value!r} must be a finite number")
            if value < 0:
                raise ConfigError(f"estimator option {key}={value!r} must not be negative")
        out[key] = value
    return out
