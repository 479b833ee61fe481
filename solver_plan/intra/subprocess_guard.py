"""`call_in_subprocess`: a wall clock enforced on solvers that overrun their own time limit (CBC),
by running them in a forked child whose whole process group is killed."""
from __future__ import annotations

import multiprocessing
import os
import signal
from typing import Callable

from solver_plan.intra.isolated import die_with_parent, redirect_solver_output

SUBPROCESS_GRACE_S = 0.3  # a forked solver killed this long after its limit (time limits allow +10% / +0.5 s)


def _child(func, args, connection) -> None:
    os.setpgid(0, 0)  # own process group, so a time-out also ends the solver processes it starts
    die_with_parent()
    redirect_solver_output()
    try:
        connection.send(("ok", func(*args)))
    except BaseException as exc:  # report every failure to the parent
        connection.send(("error", repr(exc)))
    finally:
        connection.close()


def call_in_subprocess(func: Callable, args: tuple, timeout: float | None):
    """Run func(*args) in a forked child; kill its whole process group if it exceeds `timeout`.
    Raises TimeoutError on time-out and RuntimeError if the child fails."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(func, args, sender), daemon=True)
    process.start()
    sender.close()
    try:
        wait = None if timeout is None else timeout + SUBPROCESS_GRACE_S
        if not receiver.poll(wait):
            raise TimeoutError(f"killed after {wait:.1f} s of wall clock")
        kind, payload = receiver.recv()
    except EOFError:
        raise RuntimeError(f"solver process died (exit code {process.exitcode})") from None
    finally:
        if process.is_alive():
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.join(1.0)
        receiver.close()
    if kind == "error":
        raise RuntimeError(payload)
    return payload
