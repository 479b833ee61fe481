"""The command line declines numpy's transparent-huge-page advice (cli.decline_huge_pages): with the
kernel's THP defrag at `madvise`, large allocations stalled timed work in system time (docs/time-limits.md)."""
import pytest

np_switch = pytest.importorskip("numpy._core.multiarray")._set_madvise_hugepage


@pytest.fixture
def advice_restored():
    previous = np_switch(True)
    yield
    np_switch(previous)


def test_the_advice_is_turned_off_and_the_workers_inherit_it(monkeypatch, advice_restored):
    from solver_plan.cli import decline_huge_pages

    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    decline_huge_pages()
    import os
    assert os.environ["NUMPY_MADVISE_HUGEPAGE"] == "0"  # read by numpy in the solver workers
    assert np_switch(False) is False  # the switch returns what it was: off


def test_a_users_setting_wins(monkeypatch, advice_restored):
    from solver_plan.cli import decline_huge_pages

    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")
    decline_huge_pages()
    assert np_switch(True) is True  # left on, as the user asked
