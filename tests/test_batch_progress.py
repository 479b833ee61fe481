"""The progress line: counts of done, skipped, failed and killed jobs, and an ETA from finished jobs."""
from __future__ import annotations

import io

from solver_plan.batch.progress import Progress, clock


def test_clock_reads_like_an_eta():
    assert [clock(s) for s in (0, 44.6, 65, 3599, 7260)] == ["0s", "45s", "1m05s", "59m59s", "2h01m"]


def test_line_counts_and_eta():
    stream = io.StringIO()
    progress = Progress(total=10, skipped=4, stream=stream)
    assert progress.line().startswith("[##########..............] 4/10 done (4 skipped) | running 0 | ETA ?")
    for status, killed in (("OPTIMAL", False), ("ERROR", False), ("TIME_LIMIT", True)):
        progress.job_started()
        progress.job_finished("job", status, killed)
    progress.started -= 30  # three jobs in 30 s: three more remain
    assert "7/10 done (4 skipped, 1 failed, 1 killed) | running 0 | ETA 30s" in progress.line()
    assert stream.getvalue().count("\n") == 3 and "job: TIME_LIMIT (killed)" in stream.getvalue()
