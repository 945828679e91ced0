"""`lostmid --log LOG --attempt N <command>`: the rules' logs with retries (lostmid.cli.joblog).

Each attempt writes LOG.attempt<N> under a header line; the log is the attempt that ended the job;
a failed command prints one line to the terminal, its error and the log's path, and nothing else."""

from __future__ import annotations

from conftest import REPO, lostmid


def test_a_failing_command_prints_its_one_error_line_and_the_log_path(tmp_path):
    log = tmp_path / "logs" / "job.log"
    done = lostmid("--log", str(log), "--attempt", "1", "check-config", "missing.yaml", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("lostmid check-config: error:") and "missing.yaml" in line and line.endswith(f"(log: {log})")
    text = log.read_text()
    assert text.startswith(f"== log {log}, attempt 1, ") and "missing.yaml" in text
    assert (tmp_path / "logs" / "job.log.attempt1").read_text() == text  # the failed attempt stays beside it


def test_a_retry_keeps_the_failed_attempt_and_a_first_attempt_clears_the_old_ones(tmp_path):
    log = tmp_path / "job.log"
    smoke = str(REPO / "tests" / "smoke.yaml")
    lostmid("--log", str(log), "--attempt", "1", "check-config", "missing.yaml", cwd=tmp_path)
    done = lostmid("--log", str(log), "--attempt", "2", "check-config", smoke, cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    assert sorted(path.name for path in tmp_path.glob("job.log*")) == ["job.log", "job.log.attempt1"]
    assert log.read_text().startswith(f"== log {log}, attempt 2, ") and "smoke.yaml" in log.read_text()
    lostmid("--log", str(log), "--attempt", "1", "check-config", smoke, cwd=tmp_path)
    assert sorted(path.name for path in tmp_path.glob("job.log*")) == ["job.log"]
