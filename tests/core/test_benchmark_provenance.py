"""benchmarks/harness/provenance.py: what every results file records beside its figures. The command
names the script by its repo-relative path, never by a machine's absolute one."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: benchmarks.* imports
from benchmarks.harness import provenance  # noqa: E402


def test_the_command_names_the_script_relative_to_the_repository():
    script = ROOT / "benchmarks" / "learning" / "verdict.py"
    assert provenance.command(script, ["--setting", "tiny", "--", "iterations=2"]) == \
        "python benchmarks/learning/verdict.py --setting tiny -- iterations=2"
    assert provenance.command(str(script), env="OMP_NUM_THREADS=1") == \
        "OMP_NUM_THREADS=1 python benchmarks/learning/verdict.py"


def test_a_script_outside_the_repository_is_named_without_its_folder(tmp_path):
    assert provenance.command(tmp_path / "copy.py", ["-x"]) == "python copy.py -x"


def test_cpu_seconds_and_load_read_from_a_runs_time_and_load_files(tmp_path):
    report = tmp_path / "time.txt"
    report.write_text("\tUser time (seconds): 800.25\n\tSystem time (seconds): 12.5\n\tPercent of CPU this job got: 99%\n")
    assert provenance.time_report_cpu_seconds(report) == 812.8
    report.write_text("Command terminated by signal 9\n")
    assert provenance.time_report_cpu_seconds(report) is None
    load = tmp_path / "load.txt"
    load.write_text("10:00:00 2.0 1.9 1.8 3/400 99\n10:01:00 3.0 2.1 1.9 2/400 99\n\n")
    assert provenance.mean_load(load) == 2.5


def test_the_code_version_is_a_short_commit_or_unknown(tmp_path):
    assert provenance.code_version(tmp_path) == "unknown"  # not a git checkout
    version = provenance.code_version()
    assert version == "unknown" or (len(version) >= 7 and all(c in "0123456789abcdef" for c in version))
