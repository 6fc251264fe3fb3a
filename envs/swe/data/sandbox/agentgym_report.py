"""pytest plugin loaded inside the sandbox (`-p agentgym_report`): prints one JSON line with
every test's outcome, crash message and docstring, framed by a per-run nonce."""

import json
import os
import sys

_results = {}
_docs = {}


def pytest_collection_modifyitems(items):
    for item in items:
        doc = getattr(getattr(item, "function", None), "__doc__", None)
        _docs[item.nodeid] = " ".join((doc or "").split())


def pytest_runtest_logreport(report):
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "message": ""})
    if report.failed:
        entry["outcome"] = "failed" if report.when == "call" else "error"
        crash = getattr(report.longrepr, "reprcrash", None)
        entry["message"] = (crash.message if crash is not None else str(report.longrepr))[:800]
    elif report.skipped and report.when != "teardown":
        entry["outcome"] = "skipped"


def pytest_collectreport(report):
    if report.failed:
        _results[report.nodeid or "<collection>"] = {"outcome": "error", "message": str(report.longrepr)[-800:]}


def pytest_unconfigure(config):
    nonce = os.environ.get("AGENTGYM_REPORT_NONCE", "")
    for nodeid, doc in _docs.items():
        if nodeid in _results:
            _results[nodeid]["doc"] = doc
    sys.__stdout__.write(f"\n@@REPORT-{nonce}@@" + json.dumps(_results) + f"@@END-{nonce}@@\n")
    sys.__stdout__.flush()
