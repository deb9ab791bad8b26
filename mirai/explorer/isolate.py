"""One request, isolated: a fresh process forked from the warm worker, killed with its whole tree.

The worker (`mirai.explorer.worker`) imports torch and the lowering stack once and never runs user code
itself. For each request it forks a child that:
- closes the worker's protocol pipes (so nothing the request starts can read the next request or answer
  in another's name) and answers through a pipe of its own;
- drops to the request user where the sandbox gives it one (`request_uid`: an unprivileged user that
  cannot signal or trace the worker), then sets its limits: address space, processes, CPU time, file
  size, no core files;
- starts a session of its own and dies with the worker (PR_SET_PDEATHSIG);
- works in a fresh folder under the scratch directory, which is also its HOME, TMPDIR and Triton cache.

The worker is a child subreaper, so anything the request leaves running is re-parented to it. When the
request ends (answered, crashed or out of time) every process it started is killed: all processes of the
sandbox's PID namespace but the worker where there is one, else the request's session and every
descendant of the worker. Then its files are removed. Python state changed by the request dies with the
child; the next request forks again from the untouched worker.
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
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
ANSWER_LIMIT = 1 << 30  # bytes of one answer (IR dumps can be large)
STDERR_TAIL = 6000


@dataclass(frozen=True)
class Limits:
    """Per-request limits (see Settings for the defaults and what each means)."""

    timeout_s: float
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


def run_request(
    work: Callable[[Path], dict], limits: Limits, scratch: Path, log: Callable[[str], None]
) -> dict:
    """Run `work(folder)` in a forked child under `limits`; its answer, or the guide's error shape."""
    folder = Path(os.path.join(scratch, f"mirai-request-{os.getpid()}-{time.monotonic_ns():x}"))
    folder.mkdir(mode=0o700)
    if limits.request_uid is not None:
        os.chown(folder, limits.request_uid, limits.request_uid)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the request: never returns
        os.close(read_end)
        _child(work, limits, folder, write_end)
    os.close(write_end)
    started = time.monotonic()
    try:
        data, status = _collect(pid, read_end, started + limits.timeout_s)
    finally:
        os.close(read_end)
        kill_leftovers(pid)
    elapsed = time.monotonic() - started
    stderr = _tail(folder / ".stderr")
    shutil.rmtree(folder, ignore_errors=True)
    wipe_scratch(scratch)
    if status is None:
        log(f"request killed after {elapsed:.1f} s (time limit)")
        return _error(
            f"time limit exceeded: the request ran longer than {limits.timeout_s:g} s",
            "the request and every process it started were stopped",
        )
    answer = _parse(data)
    if answer is not None:
        return answer
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return _error("the request's answer could not be read", "it was not the guide's JSON")
    return _error("the worker running the request crashed", _describe(status) + "\n" + stderr)


def _child(work, limits: Limits, folder: Path, write_end: int) -> None:
    code = 0
    me = os.getpid()
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        err = os.open(folder / ".stderr", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(err, 1)
        os.dup2(err, 2)
        _close_other_fds(keep=(0, 1, 2, write_end))
        os.setsid()
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if limits.request_uid is not None:
            os.setgroups([])
            os.setgid(limits.request_uid)
            os.setuid(limits.request_uid)
        _prctl(PR_SET_DUMPABLE, 1)
        _set_limits(limits)
        for name in ("HOME", "TMPDIR"):
            os.environ[name] = str(folder)
        import tempfile

        tempfile.tempdir = None  # re-read TMPDIR
        os.chdir(folder)
        answer = work(folder)
        if os.getpid() != me:  # a process the request forked came back here: it does not answer
            os._exit(0)
        data = json.dumps(answer).encode()
    except BaseException as err:  # noqa: BLE001 - the child must answer whatever happened
        if os.getpid() != me:
            os._exit(1)
        code = 1
        detail = "".join(traceback.format_exception(type(err), err, err.__traceback__))
        data = json.dumps(_error(f"request failed: {type(err).__name__}: {err}", detail)).encode()
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(write_end, view) :]
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
    cpu = math.ceil(limits.timeout_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
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


def _collect(pid: int, fd: int, deadline: float) -> tuple[bytes, int | None]:
    """Read the child's answer until it exits; (data, wait status), status None past the deadline.

    Once the child has exited, whatever it started is killed before the rest of the pipe is read, so
    a leftover holding the pipe open cannot stall the worker.
    """
    chunks: list[bytes] = []
    size = 0
    eof = False
    pidfd = os.pidfd_open(pid)
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return b"", None
            ready, _, _ = select.select([pidfd] if eof else [fd, pidfd], [], [], remaining)
            if fd in ready:
                chunk = os.read(fd, 1 << 20)
                eof = not chunk
                if chunk and size < ANSWER_LIMIT:
                    chunks.append(chunk)
                    size += len(chunk)
            elif pidfd in ready:
                _, status = os.waitpid(pid, 0)
                kill_leftovers(pid)
                while not eof and size < ANSWER_LIMIT:
                    chunk = os.read(fd, 1 << 20)
                    eof = not chunk
                    chunks.append(chunk)
                    size += len(chunk)
                return b"".join(chunks), status
    finally:
        os.close(pidfd)


def kill_leftovers(pid: int) -> None:
    """Kill the request `pid` and every process it started; reap them all."""
    for _ in range(100):
        if in_own_pid_namespace():
            try:
                os.kill(-1, signal.SIGKILL)  # everything in the sandbox but us and its init
            except ProcessLookupError:
                pass
        else:
            try:
                os.killpg(pid, signal.SIGKILL)  # the request's session, in one go
            except (ProcessLookupError, PermissionError):
                pass
            for target in _descendants(os.getpid()):  # and whatever left that session
                try:
                    os.kill(target, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        _reap()
        if not _descendants(os.getpid()):
            return
        time.sleep(0.01)


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
        return  # without the sandbox, the scratch folder is the host's /tmp: leave others' files
    for root in (scratch, Path("/dev/shm")):
        try:
            entries = list(root.iterdir())
        except OSError:
            continue
        for entry in entries:
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
