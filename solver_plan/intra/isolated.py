"""Run a solver function in this process if its library loads here, else in a helper process.

Why: the highspy and ortools wheels each bundle a different `libhighs.so.1`; whichever is loaded
first in a process breaks the other's import (undefined symbols). Other parts of the package import
ortools at module level, so highspy is never loaded into the main process unless it already is:
HiGHS runs in a persistent worker, a fresh `python -m solver_plan.intra.isolated` that imports only
what the call needs (not the caller's main module, unlike multiprocessing's spawn). Other
libraries run in process when they import, else in a worker too. A worker is killed and restarted
if a call overruns its wall-clock limit. Requests and answers are pickled over the worker's pipes.

No worker outlives its command: workers are killed at exit (atexit), die with their parent on Linux
(PR_SET_PDEATHSIG, even when the parent is killed with SIGKILL) and, elsewhere, notice a dead
parent by polling its pid.
"""
from __future__ import annotations

import atexit
import importlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time

GRACE_S = 0.5  # beyond the caller's deadline before the worker is killed (limits allow +10% / +0.5 s)
PARENT_POLL_S = 1.0
ALWAYS_ISOLATED = frozenset({"highspy"})
_HEADER = struct.Struct("<Q")
_importable: dict[str, bool] = {}
_workers: dict[str, "_Worker"] = {}


def importable_here(library: str) -> bool:
    if library not in _importable:
        try:
            importlib.import_module(library)
            _importable[library] = True
        except ImportError:
            _importable[library] = False
    return _importable[library]


def _read_exactly(stream, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            raise EOFError("worker pipe closed")
        data += chunk
    return bytes(data)


def _send(stream, message) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def _receive(stream):
    (size,) = _HEADER.unpack(_read_exactly(stream, _HEADER.size))
    return pickle.loads(_read_exactly(stream, size))


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # no prctl: the parent-pid poll still ends the worker
        pass


def _exit_when_orphaned(parent: int) -> None:
    while True:
        time.sleep(PARENT_POLL_S)
        if os.getppid() != parent:
            os._exit(1)


def serve(requests=None, answers=None) -> None:
    """Worker loop: answer (module, function, kwargs) requests until the pipe closes."""
    requests = requests or sys.stdin.buffer
    answers = answers or sys.stdout.buffer
    while True:
        try:
            module_name, function_name, kwargs = _receive(requests)
        except EOFError:
            return
        try:
            function = getattr(importlib.import_module(module_name), function_name)
            _send(answers, ("ok", function(**kwargs)))
        except Exception as exc:  # report any failure to the caller
            _send(answers, ("error", repr(exc)))


class _Worker:
    def __init__(self):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [root, environment.get("PYTHONPATH")]))
        environment["SOLVER_PLAN_PARENT_PID"] = str(os.getpid())
        self.process = subprocess.Popen([sys.executable, "-m", "solver_plan.intra.isolated"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment,
                                        preexec_fn=die_with_parent)

    def call(self, module_name: str, function_name: str, kwargs: dict, timeout: float | None):
        ends = None if timeout is None else time.monotonic() + timeout
        try:
            _send(self.process.stdin, (module_name, function_name, kwargs))
            # shipping a big model to a worker still importing its solver takes seconds: it counts
            wait = None if ends is None else max(0.0, ends - time.monotonic())
            ready, _, _ = select.select([self.process.stdout], [], [], wait)
            if not ready:
                self.kill()
                raise TimeoutError(f"solver process killed after {timeout:.1f} s of wall clock")
            kind, payload = _receive(self.process.stdout)
        except (EOFError, BrokenPipeError):
            self.kill()
            raise RuntimeError("solver process died") from None
        if kind == "error":
            raise RuntimeError(payload)
        return payload

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:  # unkillable (uninterruptible I/O): nothing more to do
            pass

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


def call(library: str, module_name: str, function_name: str, *, timeout: float | None = None,
         killable: bool = False, **kwargs):
    """function(**kwargs) from `module_name`, in process if `library` is (or may be) loaded here.
    `killable` forces a worker when a timeout is set, for solvers whose own limit does not cover
    the time spent building their model."""
    in_process = library in sys.modules or (library not in ALWAYS_ISOLATED and importable_here(library))
    if in_process and not (killable and timeout is not None):
        return getattr(importlib.import_module(module_name), function_name)(**kwargs)
    worker = _workers.get(library)
    if worker is None or not worker.alive:
        worker = _workers[library] = _Worker()
    wait = None if timeout is None else timeout + GRACE_S
    try:
        return worker.call(module_name, function_name, kwargs, wait)
    finally:
        if not worker.alive:
            _workers.pop(library, None)


def shutdown() -> None:
    """Kill every worker of this process (at exit, and for tests)."""
    for library in list(_workers):
        _workers.pop(library).kill()


atexit.register(shutdown)


if __name__ == "__main__":
    parent_pid = int(os.environ.get("SOLVER_PLAN_PARENT_PID", os.getppid()))
    if os.getppid() != parent_pid:  # the parent died before we started
        sys.exit(1)
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()
    serve()
