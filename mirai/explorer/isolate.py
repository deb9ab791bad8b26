"""One request, isolated: a fresh process forked from the warm worker, killed with its whole tree.

The worker (`mirai.explorer.worker`) imports torch and the lowering stack once and never runs user code
itself. Ahead of each request it forks a `Spare` child that:
- closes the worker's protocol pipes (so nothing the request starts can read the next request or answer
  in another's name) and talks through two pipes of its own: the request in, a framed answer out;
- drops to the request user where the sandbox gives it one (`request_uid`: an unprivileged user that
  cannot signal or trace the worker), then sets its limits: address space, processes, file size, no
  core files, and CPU time once the request (and its time limit) arrives;
- starts a session of its own and dies with the worker (PR_SET_PDEATHSIG);
- installs a seccomp filter (mirai.explorer.seccomp): no System V IPC objects, message queues, kernel
  keys or new namespaces, which would outlive the request;
- works in a fresh folder under the scratch directory, which is also its HOME, TMPDIR and Triton cache.

The worker is a child subreaper, so anything the request leaves running is re-parented to it. When the
request ends (answered, crashed or out of time) every process it started is killed: all processes of the
sandbox's PID namespace but the worker where there is one, else the request's session and every
descendant of the worker; they are reaped before anything else runs, so not even a zombie takes a slot
of the next request's process limit. Then its files are removed and the next spare is forked. Python state changed
by the request dies with the child; the next one forks again from the untouched worker.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import resource
import select
import shutil
import signal
import struct
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from mirai.explorer import seccomp

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
ANSWER_LIMIT = 1 << 30  # bytes of one answer (IR dumps can be large)
STDERR_TAIL = 6000


@dataclass(frozen=True)
class Limits:
    """Per-request limits (see Settings for the defaults and what each means)."""

    memory_mb: int
    processes: int
    file_mb: int
    request_uid: int | None = None  # None: the request runs as the worker's user


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def prepare_worker() -> None:
    """Once, in the worker: adopt orphans (subreaper) and keep requests from tracing the worker."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_DUMPABLE, 0)


def in_own_pid_namespace() -> bool:
    """Whether this process runs in a PID namespace of bubblewrap's (its init is pid 1), where
    kill(-1) reaches only the sandbox's processes."""
    try:
        init = Path("/proc/1/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False
    return os.getpid() != 1 and os.path.basename(init) == b"bwrap"


Work = Callable[[dict, Path], dict]


class Spare:
    """A child forked ahead of its request: set up (own session, user, limits, folder) and waiting
    on a pipe of its own, so neither the fork nor the set-up is on a request's path.

    `run` hands it one message and collects the answer; `finish` kills what the request left and
    removes its files. The worker answers the client between the two, so a child's teardown is not
    on the request's path either.
    """

    def __init__(self, work: Work, limits: Limits, scratch: Path) -> None:
        self.limits = limits
        self.scratch = scratch
        name = f"mirai-request-{os.getpid()}-{time.monotonic_ns():x}"
        self.folder = Path(os.path.join(scratch, name))
        self.folder.mkdir(mode=0o700)
        if limits.request_uid is not None:
            os.chown(self.folder, limits.request_uid, limits.request_uid)
        request_read, self._request_write = os.pipe()
        self._answer_read, answer_write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the request: never returns
            _child(work, limits, self.folder, request_read, answer_write)
        os.close(request_read)
        os.close(answer_write)

    def run(self, message: dict, timeout_s: float) -> dict:
        """The request's answer, or the guide's error shape (time limit, crash)."""
        data = json.dumps({"message": message, "timeout_s": timeout_s}).encode()
        try:
            _write_all(self._request_write, data)
        except OSError:
            pass  # the child is gone: its exit status tells why
        os.close(self._request_write)
        self._request_write = -1
        started = time.monotonic()
        answer, status = _collect(self.pid, self._answer_read, started + timeout_s)
        if answer is not None:
            return answer
        if status is None:
            return _error(
                f"time limit exceeded: the request ran longer than {timeout_s:g} s",
                "the request and every process it started were stopped",
            )
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            return _error("the request's answer could not be read", "it was not the guide's JSON")
        stderr = _tail(self.folder / ".stderr")
        return _error("the worker running the request crashed", _describe(status) + "\n" + stderr)

    def finish(self) -> bool:
        """Kill the request's processes, reap them, remove every file it wrote; False when some
        process outlived TEARDOWN_LIMIT_S (the worker must then be replaced)."""
        for fd in (self._request_write, self._answer_read):
            if fd >= 0:
                os.close(fd)
        gone = kill_leftovers(self.pid)
        shutil.rmtree(self.folder, ignore_errors=True)
        wipe_scratch(self.scratch)
        return gone


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _child(work: Work, limits: Limits, folder: Path, request_read: int, answer_write: int) -> None:
    me = os.getpid()
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        err = os.open(folder / ".stderr", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(err, 1)
        os.dup2(err, 2)
        _close_other_fds(keep=(0, 1, 2, request_read, answer_write))
        os.setsid()
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if limits.request_uid is not None:
            os.setgroups([])
            os.setgid(limits.request_uid)
            os.setuid(limits.request_uid)
        _prctl(PR_SET_DUMPABLE, 1)
        seccomp.install()  # no IPC objects, keys or namespaces that would outlive the request
        for name in ("HOME", "TMPDIR"):
            os.environ[name] = str(folder)
        import tempfile

        tempfile.tempdir = None  # re-read TMPDIR
        os.chdir(folder)
        _set_limits(limits)
        handed = json.loads(_read_all(request_read) or b"null")
        os.close(request_read)
        if handed is None:  # the worker went away without a request
            os._exit(0)
        cpu = math.ceil(handed["timeout_s"]) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        answer = work(handed["message"], folder)
        if os.getpid() != me:  # a process the request forked came back here: it does not answer
            os._exit(0)
        data = json.dumps(answer).encode()
        code = 0
    except BaseException as err:  # noqa: BLE001 - the child must answer whatever happened
        if os.getpid() != me:
            os._exit(1)
        code = 1
        detail = "".join(traceback.format_exception(type(err), err, err.__traceback__))
        data = json.dumps(_error(f"request failed: {type(err).__name__}: {err}", detail)).encode()
    try:
        _write_all(answer_write, struct.pack(">Q", len(data)) + data)
    finally:
        os._exit(code)


def _close_other_fds(keep: tuple[int, ...]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _set_limits(limits: Limits) -> None:
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    memory = mapped + (limits.memory_mb << 20)
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb << 20, limits.file_mb << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    processes = limits.processes
    if limits.request_uid is None:  # the count is per user: leave room for what already runs
        processes += _processes_of(os.getuid())
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


def _processes_of(uid: int) -> int:
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


def _collect(pid: int, fd: int, deadline: float) -> tuple[dict | None, int | None]:
    """(answer, None) once the child has written a whole answer (a length, then that much JSON);
    (None, wait status) when it exited without one; (None, None) past the deadline."""
    data = bytearray()
    pidfd = os.pidfd_open(pid)
    try:
        while True:
            answer = _framed(data)
            if answer is not None:
                return answer, None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None, None
            ready, _, _ = select.select([fd, pidfd], [], [], remaining)
            if fd in ready:
                chunk = os.read(fd, 1 << 20)
                if chunk and len(data) < ANSWER_LIMIT:
                    data += chunk
                    continue
                if chunk:
                    return (
                        _error("the request's answer is too large", f"over {ANSWER_LIMIT} bytes"),
                        None,
                    )
            if pidfd in ready or fd in ready:
                if pidfd not in ready and not select.select([pidfd], [], [], remaining)[0]:
                    return None, None  # the pipe closed, the child still runs: out of time
                while select.select([fd], [], [], 0)[0] and (chunk := os.read(fd, 1 << 20)):
                    data += chunk  # what it wrote before it exited
                    if len(data) >= ANSWER_LIMIT:
                        break
                answer = _framed(data)
                _, status = os.waitpid(pid, 0)
                return (answer, None) if answer is not None else (None, status)
    finally:
        os.close(pidfd)


def _framed(data: bytearray) -> dict | None:
    """The answer in `data` once it is whole and in the guide's shape."""
    if len(data) < 8:
        return None
    (size,) = struct.unpack(">Q", data[:8])
    if len(data) < 8 + size:
        return None
    return _parse(bytes(data[8 : 8 + size])) or _error(
        "the request's answer could not be read", "it was not the guide's JSON"
    )


TEARDOWN_LIMIT_S = 30.0


def kill_leftovers(pid: int) -> bool:
    """Kill the request `pid` and every process it started, and reap them all: no process of the
    request may hold a slot of the next one's process limit, not even as a zombie. False when they
    are not all gone after TEARDOWN_LIMIT_S (the worker then exits and is replaced)."""
    deadline = time.monotonic() + TEARDOWN_LIMIT_S
    while True:
        sandboxed = in_own_pid_namespace()
        left = _others() if sandboxed else _descendants(os.getpid())
        if not left:
            return True
        if time.monotonic() > deadline:
            return False
        if sandboxed:
            try:
                os.kill(-1, signal.SIGKILL)  # everything in the sandbox but us and its init
            except ProcessLookupError:
                pass
        else:
            try:
                os.killpg(pid, signal.SIGKILL)  # the request's session, in one go
            except (ProcessLookupError, PermissionError):
                pass
            for target in left:  # and whatever left that session
                try:
                    os.kill(target, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        _reap()  # orphans come to us (subreaper); the dying may take a while to exit
        time.sleep(0.002)


def _others() -> list[int]:
    """Every process of this PID namespace but its init and us (zombies included)."""
    me = os.getpid()
    return [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) not in (1, me)]


def _reap() -> None:
    while True:
        try:
            done, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not done:
            return


def _descendants(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(name))
    found, todo = [], [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def wipe_scratch(scratch: Path) -> None:
    """Remove whatever a request left in the sandbox's writable folders (the worker's own view)."""
    if os.environ.get("MIRAI_SANDBOX") != "bubblewrap":
        return  # without the sandbox, the scratch folder is the worker's own: its folders are enough
    keep = set(filter(None, os.environ.get("MIRAI_SANDBOX_KEEP", "").split("/")))
    for root in (scratch, Path("/dev/shm")):
        try:
            entries = list(root.iterdir())
        except OSError:
            continue
        for entry in entries:
            if root == scratch and entry.name in keep:
                continue  # holds read-only binds (a checkout under /tmp), not the request's
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                try:
                    entry.unlink()
                except OSError:
                    pass


def _parse(data: bytes) -> dict | None:
    try:
        answer = json.loads(data)
    except ValueError:
        return None
    ok = isinstance(answer, dict) and answer.get("status") in ("ok", "error")
    return answer if ok else None


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"the request's process was killed by signal {signal.Signals(number).name}"
        except ValueError:
            return f"the request's process was killed by signal {number}"
    return f"the request's process exited with code {os.waitstatus_to_exitcode(status)}"


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, path.stat().st_size - STDERR_TAIL))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def _error(message: str, detail: str = "") -> dict:
    return {"status": "error", "message": message, "detail": detail}
