"""Issue 39, item 7: importing TRL through agentgym prints none of the known-harmless vLLM warnings
(TRL's vLLM version gate, vLLM's CPU Triton notice); see agentgym/integrations/trl.py."""

import subprocess
import sys

import pytest


@pytest.mark.slow
def test_trl_import_after_agentgym_is_quiet():
    pytest.importorskip("trl")
    code = "import agentgym.integrations.trl\nfrom trl import GRPOConfig, GRPOTrainer\nprint('imported')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "imported" in done.stdout, done.stderr
    assert "TRL currently supports vLLM versions" not in done.stderr, done.stderr
    assert "Disabling Triton" not in done.stderr, done.stderr
