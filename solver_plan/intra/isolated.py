"""Run a solver function in a helper process over a private channel, or in this process.

One execution path per library, whatever was imported before:
- HiGHS (`highspy`) always runs in a persistent worker, a fresh `python -m solver_plan.intra.isolated`
  that imports only what each call needs. Why a worker: (1) the highspy and ortools wheels have
  each bundled a `libhighs`, and whichever loaded second broke the other's import; (2) a call can
  be killed at the command's deadline even while HiGHS builds its model, which its own time limit
  does not cover; (3) whatever the library prints (highspy >= 1.16 prints a banner on standard
  output when a `Highs()` is made, before output can be switched off) never reaches the terminal.
- Other libraries (ortools) run in this process, unless the caller asks for a killable call with a
  time limit, which runs in a worker of that library.

The protocol is on a private pair of pipes passed to the worker as extra file descriptors (never its
standard input or output). The worker's descriptors 0, 1 and 2 point at /dev/null (1 and 2 at this
process's standard error when SOLVER_PLAN_SOLVER_OUTPUT=1 asks for solver output) from before the
interpreter starts, so no library output can reach the channel or the terminal. Each message is
framed by a magic word and a length: anything else on the channel is reported as a broken worker,
never read as data. Every read and write on the channel is bounded by the caller's deadline; a
worker that overruns it is killed and `TimeoutError` raised.

No worker outlives its command: workers are killed at exit (atexit), die with their parent on Linux
(PR_SET_PDEATHSIG, even when the parent is killed with SIGKILL) and, elsewhere, notice a dead parent
by polling its pid. A worker ignores SIGINT: Ctrl-C is the parent's to handle (it kills the worker).
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
SOLVER_OUTPUT_VARIABLE = "SOLVER_PLAN_SOLVER_OUTPUT"  # "1": solver logs go to standard error
_MAGIC = b"SPW1"
_HEADER = struct.Struct("<4sQ")
_CHUNK = 1 << 16
_workers: dict[str, "_Worker"] = {}


class SolverFailure(RuntimeError):
    """The solver function raised, or its worker died or broke the protocol."""


def runs_in_worker(library: str, *, killable: bool = False, timeout: float | None = None) -> bool:
    """Whether a call for `library` goes to a worker: decided by the library and the call alone.
    `library` may name a worker of its own after a colon ("highspy:pulp"): callers whose use of a
    library conflicts with another's in one process get separate workers (HiGHS fixes its thread
    count for the whole process at the first solve; PuLP's HiGHS asks for 1 thread later and fails
    with "Not Solved" in a process where our backend solved first)."""
    return library.split(":")[0] in ALWAYS_ISOLATED or (killable and timeout is not None)


def _remaining(ends: float | None) -> float | None:
    return None if ends is None else max(0.0, ends - time.monotonic())


def _write_all(fd: int, data: bytes, ends: float | None) -> None:
    view = memoryview(data)
    while view:
        _, writable, _ = select.select([], [fd], [], _remaining(ends))
        if not writable:
            raise TimeoutError("the solver process did not take its request in time")
        view = view[os.write(fd, view[:_CHUNK]):]


def _read_exactly(fd: int, size: int, ends: float | None) -> bytes:
    data = bytearray()
    while len(data) < size:
        readable, _, _ = select.select([fd], [], [], _remaining(ends))
        if not readable:
            raise TimeoutError("the solver process did not answer in time")
        chunk = os.read(fd, min(_CHUNK, size - len(data)))
        if not chunk:
            raise EOFError("worker channel closed")
        data += chunk
    return bytes(data)


def send_message(fd: int, message, ends: float | None = None) -> None:
    """Write one framed (magic word, length, pickle) message to `fd`, by the monotonic time `ends` if
    given."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    _write_all(fd, _HEADER.pack(_MAGIC, len(payload)) + payload, ends)


def receive_message(fd: int, ends: float | None = None):
    """Read one framed message from `fd` by the monotonic time `ends` if given; `SolverFailure` when the
    channel holds anything but a message."""
    magic, size = _HEADER.unpack(_read_exactly(fd, _HEADER.size, ends))
    if magic != _MAGIC:
        raise SolverFailure(f"the solver process wrote {magic!r} on its channel, not a message")
    return pickle.loads(_read_exactly(fd, size, ends))


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


def solver_output_wanted() -> bool:
    """Whether the user asked to see what solver libraries print (SOLVER_PLAN_SOLVER_OUTPUT=1)."""
    return os.environ.get(SOLVER_OUTPUT_VARIABLE) == "1"


def redirect_solver_output() -> None:
    """In a forked solver child: descriptors 1 and 2 at /dev/null, so what a solver library prints,
    from C or Python, goes nowhere; or 1 at stderr when `solver_output_wanted`. Workers are started
    with the same rule (`_Worker`)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if solver_output_wanted():
        os.dup2(2, 1)
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


def _exit_when_orphaned(parent: int) -> None:
    while True:
        time.sleep(PARENT_POLL_S)
        if os.getppid() != parent:
            os._exit(1)


def serve(requests: int, answers: int) -> None:
    """Worker loop: answer (module, function, kwargs) requests until the channel closes."""
    while True:
        try:
            module_name, function_name, kwargs = receive_message(requests)
        except EOFError:
            return
        try:
            function = getattr(importlib.import_module(module_name), function_name)
            answer = ("ok", function(**kwargs))
        except Exception as exc:  # report any failure to the caller, as one line
            answer = ("error", f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        send_message(answers, answer)


class _Worker:
    def __init__(self):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [root, environment.get("PYTHONPATH")]))
        environment["SOLVER_PLAN_PARENT_PID"] = str(os.getpid())
        request_read, self.requests = os.pipe()
        self.answers, answer_write = os.pipe()
        # asked for (SOLVER_PLAN_SOLVER_OUTPUT=1): what the libraries print goes to our stderr
        logs = 2 if solver_output_wanted() else subprocess.DEVNULL
        try:
            self.process = subprocess.Popen(
                # -P: the worker imports solver_plan from `root` (PYTHONPATH), the parent's own copy, never
                # from the current folder, which `-m` would put first (a checkout there ran its code)
                [sys.executable, "-P", "-m", "solver_plan.intra.isolated", str(request_read), str(answer_write)],
                stdin=subprocess.DEVNULL, stdout=logs, stderr=logs, env=environment,
                pass_fds=(request_read, answer_write), preexec_fn=die_with_parent)
        except BaseException:
            for fd in (self.requests, self.answers):
                os.close(fd)
            raise
        finally:
            os.close(request_read)
            os.close(answer_write)

    def call(self, module_name: str, function_name: str, kwargs: dict, timeout: float | None):
        ends = None if timeout is None else time.monotonic() + timeout
        try:
            # shipping a big model to a worker still importing its solver takes seconds: it counts
            send_message(self.requests, (module_name, function_name, kwargs), ends)
            kind, payload = receive_message(self.answers, ends)
        except TimeoutError as exc:
            self.kill()
            raise TimeoutError(f"solver process killed after {timeout:.1f} s of wall clock ({exc})") from None
        except (EOFError, BrokenPipeError):
            self.kill()
            raise SolverFailure(f"solver process died (exit code {self.process.returncode})") from None
        except SolverFailure:
            self.kill()
            raise
        if kind == "error":
            raise SolverFailure(payload)
        return payload

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:  # unkillable (uninterruptible I/O): nothing more to do
            pass
        for fd in (self.requests, self.answers):
            try:
                os.close(fd)
            except OSError:
                pass
        self.requests = self.answers = -1

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


def call(library: str, module_name: str, function_name: str, *, timeout: float | None = None,
         killable: bool = False, **kwargs):
    """function(**kwargs) from `module_name`: in a worker for `library` if `runs_in_worker`, else in
    this process. Raises TimeoutError when the worker overran `timeout` (and was killed), and
    SolverFailure when the function raised or the worker died."""
    if not runs_in_worker(library, killable=killable, timeout=timeout):
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


def _worker_main(arguments: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it kills this worker
    parent_pid = int(os.environ.get("SOLVER_PLAN_PARENT_PID", os.getppid()))
    if os.getppid() != parent_pid:  # the parent died before we started
        return 1
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()
    requests, answers = int(arguments[0]), int(arguments[1])
    serve(requests, answers)
    return 0


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
