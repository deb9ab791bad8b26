"""Attacks on the explorer, against a live server: one warm worker in its bubblewrap sandbox, every
request in a fresh child (mirai.explorer.sandbox, mirai.explorer.isolate, mirai.explorer.flagpolicy).

Each test tries one attack through the HTTP API as any client could (user code run with
`ir_type: raw_ir, selected_language: pytorch`, whose output is what it prints; tool flags; request
bodies), asserts that it did not work, then that the next requests are answered right by a worker
that runs them afresh (no cached answer): `print('ok')` gives "ok\\n" and the guide's model gives its
Torch IR. Attacks that start processes also check, from the host, that nothing the request started
is left. The classes: reading secrets, writing outside the request's folder, state left for the next
request, processes left behind, stray writers of the worker's pipes, patching torch or mirai, network
egress, signalling or tracing the server and the worker, fork storms and bombs, memory bombs,
infinite loops, native crashes, tool flag injection, huge and deeply nested bodies; and one test
against a second server on the same host (a request of one may not take the other's processes).

With MIRAI_ATTACK_REPORT=<path> the figures (cases tried and held, time to recover after the heavy
attacks) are written there as JSON; docs/explorer.md ("Attack suite") quotes them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import random
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from explorer_samples import GUIDE_MODEL, LLVM_IR
from explorer_server import ROOT, Server, start_server, stop_server

TIMEOUT_S = 6
# How much later than the time limit an answer may come: the pool's grace (mirai.explorer.pool
# TIMEOUT_GRACE_S) and slack for a loaded machine.
LATE_S = 5 + 4
MEMORY_LIMIT_MB = 1024
SECRET = f"mirai-test-secret-{uuid.uuid4().hex}"
SANDBOX_UIDS = range(61000, 62000)  # host users of requests when the server runs as root
FORGED = "FORGED"
MIB = 1 << 20
# /etc in the sandbox: a few harmless files (mirai.explorer.sandbox, "no /etc beyond a few
# harmless files"); the project tree: only the package and the virtual environment.
ETC_ALLOWED = {"alternatives", "ld.so.cache", "localtime", "nsswitch.conf", "ssl"}
PROJECT_ALLOWED = {"mirai", ".venv"}


# --- the server, the figures ------------------------------------------------------------------


@pytest.fixture(scope="module")
def attacked(tmp_path_factory) -> Server:
    """One worker, a short time limit, 1 GiB of memory per request, a secret in its environment."""
    server = start_server(
        tmp_path_factory.mktemp("attacks"),
        "--workers",
        "1",
        "--timeout",
        str(TIMEOUT_S),
        "--memory-limit-mb",
        str(MEMORY_LIMIT_MB),
        env={"MIRAI_TEST_SECRET": SECRET},
    )
    try:
        server.wait_ready()
        yield server
    finally:
        stop_server(server)


@pytest.fixture(scope="session")
def figures():
    """Every case's outcome and timings; written as JSON to $MIRAI_ATTACK_REPORT at the end."""
    cases: list[dict] = []
    yield cases
    path = os.environ.get("MIRAI_ATTACK_REPORT")
    if path and cases:
        Path(path).write_text(json.dumps(summary(cases), indent=2) + "\n")


@pytest.fixture(autouse=True)
def case(request, figures) -> dict:
    """This test's entry in the figures: held unless the test failed; extra timings go in it."""
    entry = {"case": request.node.name, "class": request.node.originalname.removeprefix("test_")}
    failed_before = request.session.testsfailed
    started = time.monotonic()
    yield entry
    entry["held"] = request.session.testsfailed == failed_before
    entry["test_s"] = round(time.monotonic() - started, 2)
    figures.append(entry)


def summary(cases: list[dict]) -> dict:
    classes: dict[str, dict] = {}
    for entry in cases:
        counts = classes.setdefault(entry["class"], {"tried": 0, "held": 0})
        counts["tried"] += 1
        counts["held"] += int(entry["held"])
    try:
        bwrap = subprocess.run(["bwrap", "--version"], capture_output=True, text=True).stdout
    except OSError:
        bwrap = ""
    return {
        "cases_tried": len(cases),
        "cases_held": sum(entry["held"] for entry in cases),
        "not_held": [entry["case"] for entry in cases if not entry["held"]],
        "classes": classes,
        "attack_s": {e["case"]: e["attack_s"] for e in cases if "attack_s" in e},
        "recover_s": {e["case"]: e["recover_s"] for e in cases if "recover_s" in e},
        "suite_s": round(sum(entry["test_s"] for entry in cases), 1),
        "machine": {
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "python": platform.python_version(),
            "bubblewrap": bwrap.strip(),
            "server_as_root": os.geteuid() == 0,
        },
        "cases": cases,
    }


# --- talking to the server --------------------------------------------------------------------


def run_code(server: Server, code: str) -> dict:
    """The answer to user code run as raw_ir (its output is what it prints)."""
    return server.generate(code=code, ir_type="raw_ir", selected_language="pytorch")


def printed(server: Server, code: str) -> str:
    result = run_code(server, code)
    assert result["status"] == "ok", f"{result['message']}\n{result['detail']}"
    return result["output"]


def timed(server: Server, code: str) -> tuple[dict, float]:
    started = time.monotonic()
    result = run_code(server, code)
    return result, time.monotonic() - started


def assert_error_shape(result: dict) -> None:
    assert set(result) == {"status", "message", "detail"}, result
    assert result["status"] == "error" and result["message"], result


def assert_next_right(server: Server, since: float | None = None) -> float:
    """The requests after an attack are answered right, by the worker (not from the cache); the
    seconds from `since` (the attack's answer; else now) until the first of them was."""
    since = since if since is not None else time.monotonic()
    server.wait_ready(timeout=60)
    tag = uuid.uuid4().hex
    assert printed(server, f"print('ok')  # {tag}") == "ok\n"
    first_right = time.monotonic() - since
    response = server.post(
        "/generate_ir", {"code": f"{GUIDE_MODEL}\n# {tag}\n", "ir_type": "torch_mlir"}
    )
    assert response.headers["X-Mirai-Cache"] == "miss"
    result = response.json()
    assert result["status"] == "ok", f"{result['message']}\n{result['detail']}"
    assert "torch.aten.relu" in result["output"] and FORGED not in result["output"]
    return first_right


def mark() -> str:
    """A unique argument for `sleep`, to find the process on the host: 1000 and some decimals."""
    return f"1000.{random.randrange(10**8, 10**9)}"


# --- host processes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Proc:
    ppid: int
    uid: int
    state: str
    started: int  # clock ticks after boot
    argv: tuple[str, ...]


def processes() -> dict[int, Proc]:
    """Every process on the host."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            status = Path(f"/proc/{name}/status").read_text()
            raw = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        uid = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1]
        argv = tuple(arg.decode(errors="replace") for arg in raw.split(b"\0") if arg)
        table[int(name)] = Proc(int(fields[1]), int(uid), fields[0], int(fields[19]), argv)
    return table


def descendants(root: int, table: dict[int, Proc]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, proc in table.items():
        children.setdefault(proc.ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def is_worker_program(proc: Proc) -> bool:
    return proc.argv[1:3] == ("-m", "mirai.explorer.worker")


def workers(server: Server, table: dict[int, Proc] | None = None) -> set[int]:
    """The server's worker processes (python -m mirai.explorer.worker; not the bwrap around them,
    nor the children they fork)."""
    table = table if table is not None else processes()
    return {
        pid
        for pid in descendants(server.proc.pid, table)
        if is_worker_program(table[pid])
        and not (table[pid].ppid in table and is_worker_program(table[table[pid].ppid]))
    }


def spare_of(worker: int, table: dict[int, Proc]) -> int | None:
    """The child an idle worker holds ready for the next request (mirai.explorer.isolate.Spare):
    its youngest live child running the worker's program, forked after the last teardown."""
    ready = [
        pid
        for pid, proc in table.items()
        if proc.ppid == worker and proc.argv == table[worker].argv and proc.state != "Z"
    ]
    return max(ready, key=lambda pid: table[pid].started) if ready else None


def leftovers(server: Server, marker: str | None = None) -> list[str]:
    """Processes a request left: anything under a worker but its spare child, any process of the
    sandbox users under the server but the spares, any process with `marker` in its argv."""
    table = processes()
    found: set[int] = set()
    spares = set()
    for worker in workers(server, table):
        spares.add(spare_of(worker, table))
        found |= descendants(worker, table)
    if os.geteuid() == 0:
        under = descendants(server.proc.pid, table)
        found |= {pid for pid in under if table[pid].uid in SANDBOX_UIDS}
    found -= spares
    if marker:
        found |= {pid for pid, proc in table.items() if any(marker in a for a in proc.argv)}
    return [
        f"{pid} (uid {table[pid].uid}, state {table[pid].state}, parent {table[pid].ppid}): "
        + (" ".join(table[pid].argv)[:100] or "[no argv]")
        for pid in sorted(found)
    ]


def wait_no_leftovers(server: Server, marker: str | None = None, wait_s: float = 5.0) -> list[str]:
    """What is still left `wait_s` after the answer (nothing, once the worker has torn the request
    down: it answers first)."""
    deadline = time.monotonic() + wait_s
    left = leftovers(server, marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = leftovers(server, marker)
    return left


def assert_no_leftovers(server: Server, marker: str | None = None) -> None:
    left = wait_no_leftovers(server, marker)
    assert not left, f"{len(left)} processes left after the request:\n" + "\n".join(left[:20])


# --- 1. reading secrets -----------------------------------------------------------------------

VIEW = """
import json, os
seen = {}
for path in PATHS:
    try:
        if os.path.isdir(path):
            seen[path] = sorted(os.listdir(path))
        else:
            with open(path, "rb") as handle:
                seen[path] = handle.read(4096).decode(errors="replace")
    except OSError:
        seen[path] = None
print(json.dumps(seen))
"""


def sandbox_view(server: Server, paths: list[str]) -> dict:
    """What the sandbox shows of `paths`: a folder's names, a file's text, None when unreadable."""
    return json.loads(printed(server, VIEW.replace("PATHS", repr(paths))))


def bound_from_host() -> list[Path]:
    """What the sandbox binds from the host, read-only, beside /usr: the Python install, the
    virtual environment, the mirai package, the tools' folders."""
    wanted = [sys.prefix, sys.base_prefix, sys.exec_prefix, str(ROOT / "mirai")]
    tools = ("TORCH_MLIR_OPT_PATH", "LLVM_BIN_PATH", "TRITON_OPT_PATH")
    wanted += [os.environ.get(name, "") for name in tools]
    return [Path(f(p)) for p in wanted if p for f in (os.path.realpath, os.path.abspath)]


def allowed_in(folder: Path) -> set[str]:
    """The names under `folder` that lead to something the sandbox binds."""
    names = set()
    for path in bound_from_host():
        if folder in path.parents:
            names.add(path.relative_to(folder).parts[0])
    return names


def hidden_folder_paths(folder: Path, allowed: set[str]) -> list[str]:
    """The folder and each of its host entries that the sandbox must not show."""
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        entries = []
    return [str(folder)] + [str(folder / name) for name in entries if name not in allowed]


SECRET_PLACES = {
    "etc": (Path("/etc"), ETC_ALLOWED),
    "root_home": (Path("/root"), None),
    "home": (Path("/home"), None),
    "project_tree": (ROOT, PROJECT_ALLOWED),
}


@pytest.mark.parametrize("place", list(SECRET_PLACES))
def test_reading_host_files(attacked, place):
    folder, allowed = SECRET_PLACES[place]
    allowed = allowed if allowed is not None else allowed_in(folder)
    paths = hidden_folder_paths(folder, allowed)
    if place == "etc":
        paths += ["/etc/shadow", "/etc/passwd", "/etc/group", "/etc/hostname"]
    if place == "project_tree":
        paths += [str(ROOT / p) for p in ("pyproject.toml", ".git/config", "tests", "Makefile")]
    view = sandbox_view(attacked, paths)
    listing = view.pop(str(folder))
    assert listing is None or set(listing) <= allowed, f"{folder} shows {listing}"
    shown = {path: what for path, what in view.items() if what is not None}
    assert not shown, f"the sandbox shows host files: {sorted(shown)}"
    assert_next_right(attacked)


def test_reading_a_host_file_under_tmp(attacked, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    view = sandbox_view(attacked, [str(secret), str(tmp_path), str(attacked.cache_dir)])
    assert view == {str(secret): None, str(tmp_path): None, str(attacked.cache_dir): None}
    assert_next_right(attacked)


ENVIRON = """
import os
print(repr(dict(os.environ)))
for pid in os.listdir("/proc"):
    for name in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as handle:
                print(pid, name, handle.read())
        except OSError:
            pass
"""


def test_reading_the_server_environment(attacked):
    with open(f"/proc/{attacked.proc.pid}/environ", "rb") as handle:
        assert SECRET.encode() in handle.read()  # the server has it
    output = printed(attacked, ENVIRON)
    assert "environ" in output  # the request read its own at least
    assert SECRET not in output and "MIRAI_TEST_SECRET" not in output
    assert_next_right(attacked)


# --- 2. writing outside the request folder ----------------------------------------------------

WRITE = """
import os
for path in PATHS:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as handle:
            handle.write("MARK\\n")
        print("wrote", path)
    except OSError as err:
        print("refused", path, type(err).__name__)
"""


def test_writing_host_paths(attacked, tmp_path):
    marker = uuid.uuid4().hex
    host_dir = tmp_path / "host-dir"
    host_dir.mkdir()
    logs = sorted((attacked.cache_dir / "logs").glob("*.log"))  # appended to, never made
    made = [
        host_dir / marker,
        Path("/tmp") / f"mirai-attack-{marker}",
        attacked.cache_dir / marker,
        attacked.cache_dir / "triton" / marker,
        ROOT / marker,
        ROOT / "mirai" / marker,
        ROOT / ".venv" / marker,
        Path(sys.prefix) / "lib" / marker,
    ]
    targets = made + logs
    code = WRITE.replace("PATHS", repr([str(t) for t in targets])).replace("MARK", marker)
    output = printed(attacked, code)
    assert output.count("\n") == len(targets)  # each write was tried
    try:
        landed = [str(t) for t in targets if t.exists() and marker in t.read_text()]
        assert not landed, f"user code wrote on the host: {landed}"
        assert not list(Path("/tmp").glob(f"*{marker}*")), "user code wrote in the host's /tmp"
    finally:
        for target in made:
            if target.is_file():
                target.unlink()
    assert_next_right(attacked)


LEAVE_FILES = """
import os
os.makedirs("/tmp/MARK-dir/deep", exist_ok=True)
for path in ("/tmp/MARK", "/tmp/MARK-dir/deep/file", "/dev/shm/MARK", "/tmp/.MARK-hidden"):
    with open(path, "w") as handle:
        handle.write("left")
os.mkfifo("/tmp/MARK-fifo")
os.symlink("/tmp/MARK", "/tmp/MARK-link")
os.chmod("/tmp/MARK-dir/deep", 0)
os.chmod("/tmp/MARK-dir", 0)
print(os.environ["HOME"])
"""

FIND_FILES = """
import os
found = []
for top in ("/tmp", "/dev/shm", "/var/tmp"):
    for folder, dirs, files in os.walk(top):
        found += [os.path.join(folder, n) for n in dirs + files if "MARK" in n]
print(os.environ["HOME"])
print(found)
"""


def test_files_do_not_outlive_the_request(attacked):
    marker = uuid.uuid4().hex
    first_home = printed(attacked, LEAVE_FILES.replace("MARK", marker)).strip()
    second_home, found = printed(attacked, FIND_FILES.replace("MARK", marker)).splitlines()
    assert found == "[]", f"files of the previous request: {found}"
    assert first_home != second_home
    assert_next_right(attacked)


LEAVE_IPC = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.syscall.restype = ctypes.c_long
IPC_CREAT = 0o1000
shm = libc.shmget(KEY, 1 << 20, IPC_CREAT | 0o600)
if shm != -1:
    address = libc.shmat(shm, None, 0)
    ctypes.memmove(address, b"MARK", len(b"MARK"))
    libc.shmdt(ctypes.c_void_p(address))
queue = libc.msgget(KEY + 1, IPC_CREAT | 0o600)
if queue != -1:
    message = ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_long) + 32)
    body = ctypes.addressof(message) + ctypes.sizeof(ctypes.c_long)
    ctypes.memmove(body, b"MARK", len(b"MARK"))
    ctypes.c_long.from_buffer(message).value = 1
    libc.msgsnd(queue, message, 32, 0)
semaphores = libc.semget(KEY + 2, 1, IPC_CREAT | 0o600)
keys = [
    libc.syscall(248, b"user", b"MARK", b"MARK", len(b"MARK"), ctypes.c_long(ring))
    for ring in (-4, -5)
]
print(shm, queue, semaphores, keys)
"""

FIND_IPC = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
left = []
for kind in ("shm", "msg", "sem"):
    with open(f"/proc/sysvipc/{kind}") as table:
        left += [f"{kind}: {line.split()[:2]}" for line in table.read().splitlines()[1:]]
for ring, name in ((-4, "user keyring"), (-5, "user session keyring")):
    if libc.syscall(250, 10, ctypes.c_long(ring), b"user", b"MARK", 0) > 0:
        left.append(name)
if os.path.exists("/proc/keys"):
    with open("/proc/keys") as keys:
        left += [line.split()[-2] for line in keys if "MARK" in line]
print(left)
"""


def test_ipc_objects_and_keys_do_not_outlive_the_request(attacked):
    """System V shared memory, message queues and semaphores live in the sandbox's IPC namespace,
    keys in its users' keyrings: neither may carry anything to the next request (nor hold memory
    past the request's end)."""
    marker = f"mirai-{uuid.uuid4().hex[:12]}"
    key = random.randrange(1 << 20, 1 << 30)
    # Refused outright (-1, EPERM) or made: either way none may be left for the next request.
    printed(attacked, LEAVE_IPC.replace("KEY", str(key)).replace("MARK", marker))
    left = printed(attacked, FIND_IPC.replace("MARK", marker)).strip()
    assert left == "[]", f"the next request sees the previous one's IPC objects and keys: {left}"
    assert_next_right(attacked)


UNSHARE_USER = """
import ctypes, os
CLONE_NEWUSER = 0x10000000
pid = os.fork()
if pid == 0:
    libc = ctypes.CDLL(None, use_errno=True)
    os._exit(0 if libc.unshare(CLONE_NEWUSER) == 0 else 1)
_, status = os.waitpid(pid, 0)
print("made" if os.waitstatus_to_exitcode(status) == 0 else "refused")
"""


def test_no_further_user_namespaces(attacked):
    """The sandbox allows no user namespace of the request's own (where it would be root: mounts,
    new network and PID namespaces, the kernel's code behind them)."""
    assert printed(attacked, UNSHARE_USER) == "refused\n"
    assert_next_right(attacked)


# --- 3. processes left behind ---------------------------------------------------------------

LEAVE_PROCESS = {
    "setsid_child": """
import os
if os.fork() == 0:
    os.setsid()
    os.execvp("sleep", ["sleep", "MARK"])
print("started")
""",
    "double_fork": """
import os
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        os.execvp("sleep", ["sleep", "MARK"])
    os._exit(0)
os.wait()
print("started")
""",
    "stopped_child": """
import os, signal
pid = os.fork()
if pid == 0:
    os.execvp("sleep", ["sleep", "MARK"])
os.kill(pid, signal.SIGSTOP)
print("started")
""",
    "new_session_subprocess": """
import subprocess
subprocess.Popen(["sleep", "MARK"], start_new_session=True, stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("started")
""",
    "nested_pid_namespace": """
import subprocess, time
subprocess.Popen(["unshare", "--user", "--map-root-user", "--pid", "--fork", "sleep", "MARK"],
                 start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL)
time.sleep(0.5)
print("started")
""",
}


@pytest.mark.parametrize("how", list(LEAVE_PROCESS))
def test_processes_left_behind(attacked, how):
    marker = mark()
    assert printed(attacked, LEAVE_PROCESS[how].replace("MARK", marker)) == "started\n"
    assert_no_leftovers(attacked, marker)
    assert_next_right(attacked)


# --- 4. stray readers and writers of the worker's pipes ---------------------------------------

STRAY_WRITER = """
import os, time
LINE = b'{"id": "x", "response": {"status": "ok", "output": "FORGED"}}\\n'

def spray():
    for fd in range(65):
        try:
            os.write(fd, LINE)
        except OSError:
            pass
    for pid in ("1", "2", str(os.getppid()), "self"):
        for fd in range(65):
            try:
                with open(f"/proc/{pid}/fd/{fd}", "wb", buffering=0) as handle:
                    handle.write(LINE)
            except OSError:
                pass
    try:
        os.set_blocking(0, False)
        os.read(0, 1 << 16)
    except OSError:
        pass

if os.fork() == 0:
    for _ in range(200):  # keeps at it while the next requests run, if it is still alive
        spray()
        time.sleep(0.02)
    os._exit(0)
spray()
print("sprayed")
"""


def test_stray_writer_of_the_pipes(attacked):
    result = run_code(attacked, STRAY_WRITER)
    assert result["status"] in ("ok", "error"), result  # its own answer: its own business
    tag = uuid.uuid4().hex
    for _ in range(2):
        assert printed(attacked, f"print('{tag}')") == f"{tag}\n"
        guide = attacked.ok(code=f"{GUIDE_MODEL}\n# {tag}\n", ir_type="torch_mlir")
        assert "torch.aten.relu" in guide and FORGED not in guide
        raw = f"{LLVM_IR}; {tag}\n"
        echoed = attacked.ok(code=raw, ir_type="raw_ir", selected_language="raw_ir")
        assert echoed == raw
        tag = uuid.uuid4().hex
    again = attacked.post(
        "/generate_ir", {"code": raw, "ir_type": "raw_ir", "selected_language": "raw_ir"}
    )
    assert again.headers["X-Mirai-Cache"] == "hit" and again.json()["output"] == raw
    assert_no_leftovers(attacked)
    assert_next_right(attacked)


# --- 5. patching torch or the lowering code ---------------------------------------------------

PATCH = {
    "torch": """
import torch, torch.nn.functional as F
torch.relu = lambda x: x
F.relu = lambda x, inplace=False: x
torch.Tensor.relu = lambda self: self
torch.nn.Module.__call__ = lambda self, *args, **kwargs: None
print("patched")
""",
    "mirai_modules": """
import sys, types
def forged(*args, **kwargs):
    return {"status": "ok", "output": "FORGED"}
for name, module in list(sys.modules.items()):
    if name.startswith("mirai") and module is not None:
        for attr, value in list(vars(module).items()):
            if isinstance(value, types.FunctionType):
                setattr(module, attr, forged)
print("patched")
""",
    "files_on_disk": """
import os, site, torch, mirai.explorer.execute as execute
for path in (torch.__file__, execute.__file__, os.path.join(site.getsitepackages()[0], "sitecustomize.py")):
    try:
        with open(path, "a") as handle:
            handle.write("raise SystemExit('FORGED')\\n")
        print("wrote", path)
    except OSError as err:
        print("refused", type(err).__name__)
""",
}


@pytest.mark.parametrize("what", list(PATCH))
def test_patching_torch_or_mirai(attacked, what):
    watched = [Path(importlib.util.find_spec("torch").origin), ROOT / "mirai/explorer/execute.py"]
    before = [p.read_bytes() for p in watched]
    result = run_code(attacked, PATCH[what])
    assert result["status"] in ("ok", "error"), result
    if what == "files_on_disk":
        assert "wrote" not in result["output"], result["output"]
    assert [p.read_bytes() for p in watched] == before
    assert_next_right(attacked)
    check = "import torch\nprint(torch.relu(torch.tensor([-1.0, 2.0])).tolist())\n"
    assert printed(attacked, check + f"# {uuid.uuid4().hex}\n") == "[0.0, 2.0]\n"


# --- 6. network egress ------------------------------------------------------------------------


class Listener:
    """A TCP listener on the host's 127.0.0.1 and an abstract unix socket, each recording whether
    anything connected, and a UDP socket recording whether anything arrived."""

    def __init__(self) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.unix_name = f"mirai-attack-{uuid.uuid4().hex}"
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind("\0" + self.unix_name)
        self.unix.listen()
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.seen: list[str] = []
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._accept, args=(s, n), daemon=True)
            for s, n in ((self.tcp, "tcp"), (self.unix, "unix"))
        ]
        self.threads.append(threading.Thread(target=self._receive, daemon=True))
        for thread in self.threads:
            thread.start()

    @property
    def port(self) -> int:
        return self.tcp.getsockname()[1]

    @property
    def udp_port(self) -> int:
        return self.udp.getsockname()[1]

    def _accept(self, server: socket.socket, name: str) -> None:
        server.settimeout(0.1)
        while not self.stop.is_set():
            try:
                connection, _ = server.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            self.seen.append(name)
            connection.close()

    def _receive(self) -> None:
        self.udp.settimeout(0.1)
        while not self.stop.is_set():
            try:
                self.udp.recvfrom(1024)
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            self.seen.append("udp")

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(5)
        for s in (self.tcp, self.unix, self.udp):
            s.close()


CONNECT = """
import socket
def tcp(port):
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
def unix(name):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        s.connect("\\0" + name)
def udp(port):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _ in range(5):
            s.sendto(b"x", ("127.0.0.1", port))
for name, attempt, arg in (("listener", tcp, @PORT@), ("server", tcp, @SERVER_PORT@),
                           ("unix", unix, "@UNIX_NAME@"), ("udp", udp, @UDP_PORT@)):
    try:
        attempt(arg)
        print(name, "connected")
    except OSError as err:
        print(name, "failed", type(err).__name__)
print("interfaces", [name for _, name in socket.if_nameindex()])
"""


def test_network_egress(attacked):
    listener = Listener()
    try:
        code = (
            CONNECT.replace("@SERVER_PORT@", str(httpx.URL(attacked.url).port))
            .replace("@UDP_PORT@", str(listener.udp_port))
            .replace("@PORT@", str(listener.port))
            .replace("@UNIX_NAME@", listener.unix_name)
        )
        output = printed(attacked, code)
        time.sleep(0.3)
    finally:
        listener.close()
    lines = output.splitlines()
    for name in ("listener", "server", "unix"):
        assert f"{name} failed" in "\n".join(lines), output
    assert lines[-1] == "interfaces ['lo']", output
    assert listener.seen == [], f"the host saw connections from the sandbox: {listener.seen}"
    assert_next_right(attacked)


# --- 7. signalling and tracing the server and the worker --------------------------------------

KILL = """
import errno, os, signal
try:
    os.kill(TARGET, SIGNAL)
    print("sent")
except OSError as err:
    print(errno.errorcode[err.errno])
"""

KILL_TARGETS = {
    "server": ("SERVER_PID", "signal.SIGKILL"),
    "everything": ("-1", "signal.SIGKILL"),
    "parent": ("os.getppid()", "signal.SIGKILL"),
    "parent_stop": ("os.getppid()", "signal.SIGSTOP"),
    "sandbox_init": ("1", "signal.SIGKILL"),
}


@pytest.mark.parametrize("target", list(KILL_TARGETS))
def test_signalling_the_server(attacked, target):
    pid, number = KILL_TARGETS[target]
    before = workers(attacked)
    pid = pid.replace("SERVER_PID", str(attacked.proc.pid))
    result = run_code(attacked, KILL.replace("TARGET", pid).replace("SIGNAL", number))
    assert result["status"] == "ok", result
    if target != "everything":  # kill(-1) reaches only the request's own processes
        assert result["output"] in ("EPERM\n", "ESRCH\n"), result["output"]
    assert attacked.proc.poll() is None
    assert attacked.get("/health").json()["ready"]
    assert workers(attacked) == before  # the worker was not even touched
    assert_next_right(attacked)


TRACE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
parent = os.getppid()
for request in (PTRACE_ATTACH, PTRACE_SEIZE):
    print("ptrace", "attached" if libc.ptrace(request, parent, 0, 0) == 0 else "refused")
for name in ("mem", "environ", "maps", "fd"):
    try:
        path = f"/proc/{parent}/{name}"
        print(name, os.listdir(path) if name == "fd" else open(path, "rb").read(64))
    except OSError:
        print(name, "refused")
"""


def test_tracing_the_worker(attacked):
    before = workers(attacked)
    output = printed(attacked, TRACE)
    assert output.split("\n")[:-1] == [
        "ptrace refused",
        "ptrace refused",
        "mem refused",
        "environ refused",
        "maps refused",
        "fd refused",
    ], output
    assert workers(attacked) == before
    assert_next_right(attacked)


# --- 8. fork storm and fork bomb --------------------------------------------------------------

FORK_STORM = """
import os, subprocess
procs = [subprocess.Popen(["true"]) for _ in range(COUNT)]
started = sum(p.wait() == 0 for p in procs)
for _ in range(COUNT):
    if os.fork() == 0:
        os._exit(0)
    os.wait()
print(started)
"""


def test_fork_storm(attacked, case):
    result, elapsed = timed(attacked, FORK_STORM.replace("COUNT", "50"))
    answered, case["attack_s"] = time.monotonic(), round(elapsed, 2)
    assert result == {"status": "ok", "output": "50\n"}, result
    assert_no_leftovers(attacked)
    case["recover_s"] = round(assert_next_right(attacked, answered), 2)


FORK_BOMB = {
    "plain": "import os\nwhile True:\n    os.fork()\n",
    "persistent": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
    "        pass\n",
    # Each process holds 10000 small mappings: the kernel takes a while to tear each one down
    # once killed, so the bomb's processes die slowly, as on a loaded machine.
    "slow_to_die": "import mmap, os\n"
    "held = [mmap.mmap(-1, 4096, prot=mmap.PROT_READ | (i % 2) * mmap.PROT_WRITE)"
    " for i in range(10000)]\n"
    "while True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
}
CLEAN_ERRORS = ("time limit exceeded", "error in user code", "the worker running the request")


@pytest.mark.parametrize("kind", list(FORK_BOMB))
def test_fork_bomb(attacked, kind, case):
    result, elapsed = timed(attacked, FORK_BOMB[kind])
    case["attack_s"] = round(elapsed, 2)
    assert_error_shape(result)
    assert result["message"].startswith(CLEAN_ERRORS), result
    assert elapsed < TIMEOUT_S + LATE_S
    answered = time.monotonic()
    # The next request starts processes: they are counted per user, so anything the bomb left
    # (zombies too) would take them from it.
    after = run_code(attacked, FORK_STORM.replace("COUNT", "20") + f"# {uuid.uuid4().hex}\n")
    after_s = time.monotonic() - answered
    left = wait_no_leftovers(attacked)
    first_right = assert_next_right(attacked, answered)
    next_ok = after == {"status": "ok", "output": "20\n"}
    case["recover_s"] = round(after_s if next_ok else first_right, 2)
    case["next_request_starting_processes_ok"] = next_ok
    assert next_ok, (
        "the next request could not start its processes (the bomb's processes, dead or not, are "
        f"still counted against the request user): {after}"
    )
    assert not left, f"{len(left)} processes left after the fork bomb:\n" + "\n".join(left[:10])


HOLD_PROCESSES = """
import subprocess, time
procs = []
for _ in range(60):
    try:
        procs.append(subprocess.Popen(["sleep", "MARK"]))
    except OSError:
        break
time.sleep(2.5)
print(len(procs))
"""


@pytest.fixture(scope="module")
def neighbour(tmp_path_factory) -> Server:
    """A second server on the same host, as an operator running two instances has."""
    server = start_server(
        tmp_path_factory.mktemp("neighbour"), "--workers", "1", "--timeout", str(TIMEOUT_S)
    )
    try:
        server.wait_ready()
        yield server
    finally:
        stop_server(server)


def request_users(server: Server) -> set[int]:
    """The host users the server's requests run as (those of its workers' spare children)."""
    table = processes()
    spares = [spare_of(worker, table) for worker in workers(server, table)]
    return {table[spare].uid for spare in spares if spare is not None}


def test_fork_storm_leaves_another_server_its_processes(attacked, neighbour):
    """Two servers on one host: what one's request runs may not count against the processes the
    other's requests may run."""
    users = {"attacked": request_users(attacked), "neighbour": request_users(neighbour)}
    marker = f"5.{random.randrange(10**8, 10**9)}"
    held: dict = {}
    thread = threading.Thread(
        target=lambda: held.update(run_code(attacked, HOLD_PROCESSES.replace("MARK", marker)))
    )
    thread.start()
    deadline = time.monotonic() + 10
    while sum(marker in proc.argv for proc in processes().values()) < 50:
        assert thread.is_alive() and time.monotonic() < deadline, held
        time.sleep(0.05)
    result = run_code(neighbour, FORK_STORM.replace("COUNT", "20") + f"# {uuid.uuid4().hex}\n")
    thread.join()
    assert held["status"] == "ok" and int(held["output"]) >= 50, held
    assert result == {"status": "ok", "output": "20\n"}, (
        "a request of one server used up the processes of another server's request "
        f"(host users of the requests: {users}): {result}"
    )
    for server in (attacked, neighbour):
        assert_no_leftovers(server, marker)
        assert_next_right(server)


# --- 9. memory bombs --------------------------------------------------------------------------

MEMORY_BOMB = {
    "bytearray_50_gib": "x = bytearray(50 * 1024**3)\nprint(len(x))\n",
    "growing_list": "x = []\nwhile True:\n    x.append(bytearray(16 << 20))\n",
}


@pytest.mark.parametrize("kind", list(MEMORY_BOMB))
def test_memory_bomb(attacked, kind, case):
    result, elapsed = timed(attacked, MEMORY_BOMB[kind])
    answered, case["attack_s"] = time.monotonic(), round(elapsed, 2)
    assert_error_shape(result)
    assert "memory" in (result["message"] + result["detail"]).lower(), result
    assert_no_leftovers(attacked)
    case["recover_s"] = round(assert_next_right(attacked, answered), 2)


# --- 10. infinite loops -----------------------------------------------------------------------

LOOP = {
    "busy": "while True:\n    pass\n",
    "sleeping_deaf_to_signals": "import signal, time\n"
    "for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):\n"
    "    signal.signal(number, signal.SIG_IGN)\n"
    "while True:\n    time.sleep(3600)\n",
}


@pytest.mark.parametrize("kind", list(LOOP))
def test_infinite_loop(attacked, kind, case):
    result, elapsed = timed(attacked, LOOP[kind])
    answered, case["attack_s"] = time.monotonic(), round(elapsed, 2)
    assert_error_shape(result)
    assert result["message"] == f"time limit exceeded: the request ran longer than {TIMEOUT_S} s"
    assert TIMEOUT_S <= elapsed < TIMEOUT_S + LATE_S
    assert_no_leftovers(attacked)
    case["recover_s"] = round(assert_next_right(attacked, answered), 2)


# --- 11. native crashes -----------------------------------------------------------------------

CRASH = {
    "null_read": ("import ctypes\nctypes.string_at(0)\n", "SIGSEGV"),
    "abort": ("import os\nos.abort()\n", "SIGABRT"),
    "stack_overflow": (
        'import json, sys\nsys.setrecursionlimit(10**9)\njson.loads("[" * 10**7 + "]" * 10**7)\n',
        "SIGSEGV",
    ),
}


@pytest.mark.parametrize("kind", list(CRASH))
def test_native_crash(attacked, kind, case):
    code, signal_name = CRASH[kind]
    result, elapsed = timed(attacked, code)
    answered, case["attack_s"] = time.monotonic(), round(elapsed, 2)
    assert_error_shape(result)
    assert result["message"] == "the worker running the request crashed"
    assert signal_name in result["detail"]
    assert_no_leftovers(attacked)
    case["recover_s"] = round(assert_next_right(attacked, answered), 2)


# --- 12. tool flag injection ------------------------------------------------------------------

# (request field, flags, the tool named in the error, the refused flag the detail names)
FLAG_INJECTION = {
    "mlir_opt_output": ("mlir_opt", "--canonicalize -o OUT", "mlir-opt", "-o"),
    "mlir_opt_output_equals": ("mlir_opt", "-o=OUT", "mlir-opt", "-o=OUT"),
    "mlir_translate_output": ("mlir_translate", "--mlir-to-llvmir -o OUT", "mlir-translate", "-o"),
    "llc_output": ("llc", "-mtriple=nvptx64-nvidia-cuda -o OUT", "llc", "-o"),
    "llc_output_attached": ("llc", "-oOUT", "llc", "-oOUT"),
    "opt_load": ("llvm_opt", "--load=PLUGIN", "opt", "--load=PLUGIN"),
    "opt_pass_plugin": ("llvm_opt", "-load-pass-plugin=PLUGIN", "opt", "-load-pass-plugin=PLUGIN"),
    "response_file": ("llc", "@/etc/passwd", "llc", "@/etc/passwd"),
    "extra_input": ("llvm_opt", "-passes=instcombine /etc/passwd", "opt", "/etc/passwd"),
    "chained_stage": ("llvm_opt", "-passes=instcombine && -S -o OUT", "opt", "-o"),
    "triton_opt_output": ("triton_opt", "--canonicalize -o OUT", "triton-opt", "-o"),
    "triton_opt_attached": ("triton_opt", "-oOUT", "triton-opt", "-oOUT"),
}


@pytest.mark.parametrize("form", list(FLAG_INJECTION))
def test_flag_injection(attacked, tmp_path, form):
    field, flags, tool, refused = FLAG_INJECTION[form]
    out, plugin = tmp_path / "written.txt", tmp_path / "plugin.so"
    fill = {"OUT": str(out), "PLUGIN": str(plugin)}
    for name, value in fill.items():
        flags, refused = flags.replace(name, value), refused.replace(name, value)
    result = attacked.generate(
        code=LLVM_IR, ir_type="raw_ir", selected_language="raw_ir", **{field: flags}
    )
    assert_error_shape(result)
    assert result["message"] == f"Invalid flags for {tool}", result
    assert f"{refused}: " in result["detail"], result["detail"]
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []
    assert_next_right(attacked)


INCBIN = 'module asm ".incbin \\22PATH\\22"\n' + LLVM_IR


@pytest.mark.tools  # llc-22
@pytest.mark.parametrize("place", ["etc_shadow", "host_tmp"])
def test_llc_incbin_reads_no_host_file(attacked, tmp_path, place):
    """`.incbin` in module asm makes llc's assembler read a file (the flag policy cannot see it):
    only files inside the sandbox can be read."""
    if place == "etc_shadow":
        path = Path("/etc/shadow")
        secret = path.read_text().splitlines()[0] if path.exists() else "root:"
    else:
        path = tmp_path / "secret.txt"
        path.write_text(SECRET)
        secret = SECRET
    for flags in ("-filetype=asm", "-filetype=obj", "-mtriple=x86_64-unknown-linux-gnu"):
        result = attacked.generate(
            code=INCBIN.replace("PATH", str(path)),
            ir_type="raw_ir",
            selected_language="raw_ir",
            llc=flags,
        )
        text = result.get("output", "") + result.get("detail", "")
        assert secret not in text, flags
        assert result["status"] == "error" and "incbin" in result["detail"], result
    assert_next_right(attacked)


# --- 13. huge and deeply nested bodies --------------------------------------------------------


def test_huge_body(attacked):
    response = attacked.post("/generate_ir", b" " * (100 * MIB), timeout=120)
    assert response.status_code in (200, 413), response.text[:200]
    assert_error_shape(response.json())
    assert attacked.proc.poll() is None
    assert_next_right(attacked)


def test_deeply_nested_body(attacked):
    depth = 100_000
    for body in (b"[" * depth + b"]" * depth, b'{"code": ' + b"[" * depth + b"]" * depth + b"}"):
        response = attacked.post("/generate_ir", body)
        assert response.status_code in (200, 400, 413), response.text[:200]
        assert_error_shape(response.json())
    assert attacked.proc.poll() is None
    assert_next_right(attacked)
