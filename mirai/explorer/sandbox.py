"""The explorer's sandbox: the command line that starts a worker inside bubblewrap (`bwrap`).

Every worker process, and so every request's user code and every pipeline tool it runs, lives in a
bubblewrap sandbox:
- its own user, PID, network, IPC, UTS and cgroup namespaces: no network but a
  loopback of its own, no view of the server's processes (requests get no namespaces of their own: mirai.explorer.seccomp);
- a filesystem made of read-only binds of what Python and the tools need (/usr, the Python install,
  the virtual environment, the mirai package) and a size-capped private tmpfs at /tmp; no /home,
  /root, project tree or /etc beyond a few harmless files;
- unprivileged users. When the server runs as root, the sandbox gets a user namespace that maps two
  users: the worker runs as the namespace's root (it needs to set up and kill requests; bubblewrap
  leaves it only the capabilities for that), and each request drops to `REQUEST_UID`, which is a host
  user of its own per worker slot (`SANDBOX_UID_BASE + n`): it cannot signal, trace or write to the
  worker, and the kernel counts its processes against that user alone. Without root, bubblewrap maps
  the server's user, and worker and requests share it;
- `--die-with-parent`: the sandbox dies when the server does.

Limits on memory, processes, CPU time and file size are set per request by the worker
(`mirai.explorer.isolate`), which also kills each request's whole process tree when it ends.

Why bubblewrap: it is packaged by Debian, small, unprivileged (user namespaces), and is what Flatpak
relies on; nsjail (Compiler Explorer's choice) is not packaged by Debian and needs a build from source.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mirai.explorer.errors import ExplorerError

BWRAP = "bwrap"
SANDBOX_UID_BASE = 61000  # host users of requests when the server runs as root: 61000 + slot
SANDBOX_SLOTS = 1000
REQUEST_UID = 1000  # the user id requests run as, seen inside the sandbox
WORKER_CAPS = (
    "CAP_SETUID",
    "CAP_SETGID",
    "CAP_KILL",
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FOWNER",
)
ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/etc/nsswitch.conf")
ETC_DIRS = ("/etc/alternatives", "/etc/ssl/certs")


@dataclass(frozen=True)
class Launch:
    """How to start one worker: its argv and environment, the file descriptors it inherits (the user
    namespace), the user requests drop to (None: the worker's own), and the process that holds the
    user namespace until bubblewrap has joined it (`release` ends it)."""

    argv: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()
    request_uid: int | None = None
    holder: subprocess.Popen | None = None

    def release(self) -> None:
        """Once the worker has started: close the namespace's descriptor, stop its holder."""
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        if self.holder is not None:
            self.holder.kill()
            self.holder.wait()


def bwrap_path() -> str | None:
    return shutil.which(BWRAP)


def describe(enabled: bool) -> str:
    """What /version and the log say about the sandbox."""
    if not enabled:
        return "sandbox off"
    try:
        version = subprocess.run(
            [BWRAP, "--version"], capture_output=True, text=True, timeout=10
        ).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        version = []
    return "sandbox " + (" ".join(version) if version else "bubblewrap")


def _user_namespace(outside_uid: int) -> tuple[int, subprocess.Popen]:
    """A user namespace mapping root to root and REQUEST_UID to `outside_uid` (root only); its
    descriptor and the process holding it (util-linux `unshare`)."""
    holder = subprocess.Popen(
        ["unshare", "--user", "--", "sleep", "600"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    ours = os.readlink("/proc/self/ns/user")
    deadline = time.monotonic() + 10
    try:
        while os.readlink(f"/proc/{holder.pid}/ns/user") == ours:
            if holder.poll() is not None or time.monotonic() > deadline:
                raise ExplorerError(
                    "the sandbox's user namespace could not be made", "unshare --user"
                )
            time.sleep(0.002)
        for kind in ("uid", "gid"):
            with open(f"/proc/{holder.pid}/{kind}_map", "w") as mapping:
                mapping.write(f"0 0 1\n{REQUEST_UID} {outside_uid} 1\n")
        return os.open(f"/proc/{holder.pid}/ns/user", os.O_RDONLY), holder
    except BaseException:
        holder.kill()
        holder.wait()
        raise


def read_only_paths(extra: tuple[str, ...] = ()) -> list[str]:
    """Host paths a worker needs to read: Python, the venv, the mirai package, the tools' folders."""
    import mirai

    # Not sys.path as such: it holds the server's working folder (the project tree, under `-m`).
    wanted = [sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(mirai.__file__).parent)]
    wanted += [os.environ[v] for v in _tool_dir_vars() if os.environ.get(v)]
    wanted += list(extra)
    paths: list[str] = []
    for raw in sorted({os.path.realpath(p) for p in wanted} | {os.path.abspath(p) for p in wanted}):
        if raw == "/" or raw.startswith("/usr/") or not os.path.exists(raw):
            continue
        if not any(raw.startswith(parent + "/") for parent in paths):
            paths.append(raw)
    return paths


def worker_launch(
    command: list[str], *, slot: int, scratch_mb: int, host_tmp_visible: bool = False
) -> Launch:
    """`command` (the worker's argv) wrapped in bwrap; raises ExplorerError when bwrap is missing."""
    bwrap = bwrap_path()
    if bwrap is None:
        raise ExplorerError(
            "the sandbox tool bubblewrap (bwrap) is not installed",
            "install it (`apt-get install bubblewrap`, as `make` does) or start the server with "
            "--no-sandbox on a machine only you use",
        )
    argv = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    argv += ["--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    argv += ["--hostname", "mirai-sandbox"]
    fds: tuple[int, ...] = ()
    holder = None
    request_uid = None
    if os.geteuid() == 0:
        fd, holder = _user_namespace(SANDBOX_UID_BASE + slot % SANDBOX_SLOTS)
        fds, request_uid = (fd,), REQUEST_UID
        argv += ["--userns", str(fd)]
        for cap in WORKER_CAPS:
            argv += ["--cap-add", cap]
    else:
        argv += ["--unshare-user", "--disable-userns"]
        argv += ["--uid", str(REQUEST_UID), "--gid", str(REQUEST_UID)]
    argv += ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib64", "sbin"):
        host = Path("/") / name
        if host.is_symlink():
            argv += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            argv += ["--ro-bind", str(host), str(host)]
    # The scratch tmpfs before the binds: a bind below it (a checkout under /tmp) stays visible.
    scratch = scratch_dir(host_tmp_visible)
    if host_tmp_visible:  # --allow-user-tools: the single user's tools may live in the host's /tmp
        argv += ["--ro-bind", "/tmp", "/tmp"]
    argv += ["--perms", "1777", "--size", str(scratch_mb << 20), "--tmpfs", scratch]
    binds = read_only_paths()
    for folder in _parents([*binds, *ETC_FILES, *ETC_DIRS]):  # else bwrap makes them 0700
        if not (host_tmp_visible and _below(folder, "/tmp")):  # those exist in the host's /tmp
            argv += ["--perms", "0755", "--dir", folder]
    for path in ETC_FILES + ETC_DIRS:
        argv += ["--ro-bind-try", path, path]
    for path in binds:
        argv += ["--ro-bind", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--perms", "1777", "--size", str(scratch_mb << 20), "--tmpfs", "/dev/shm"]
    env = _environment(scratch)
    # What the teardown must leave in the scratch folder: the folders that hold binds.
    keep = sorted({Path(b).relative_to(scratch).parts[0] for b in binds if _below(b, scratch)})
    if keep:
        env["MIRAI_SANDBOX_KEEP"] = "/".join(keep)
    argv += ["--clearenv", "--chdir", scratch]
    for name, value in env.items():
        argv += ["--setenv", name, value]
    return Launch([*argv, "--", *command], env, fds, request_uid, holder)


def _below(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip("/") + "/")


def _parents(paths: list[str]) -> list[str]:
    """The folders above `paths`, outermost first, each once."""
    folders: list[str] = []
    for path in paths:
        for parent in reversed(Path(path).parents[:-1]):
            if str(parent) not in folders:
                folders.append(str(parent))
    return folders


def _tool_dir_vars() -> list[str]:
    """The env vars that name the tools' folders, as the tool registry has them."""
    from mirai.explorer.tools import TOOLS

    return sorted({tool.env_var for tool in TOOLS.values() if tool.env_var})


def scratch_dir(host_tmp_visible: bool) -> str:
    """The sandbox's only writable folder (a tmpfs; each request works in a subfolder): /tmp, or
    /var/tmp where the host's /tmp is bound read-only for user tools."""
    return "/var/tmp" if host_tmp_visible else "/tmp"


def _environment(scratch: str) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    env = {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": scratch,
        "TMPDIR": scratch,
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MIRAI_SANDBOX": "bubblewrap",
    }
    for name in (*_tool_dir_vars(), "PYTHONPATH", "MIRAI_CACHE_DIR"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


def check_works(scratch_mb: int = 64) -> None:
    """Start a throwaway sandbox as a worker would; raise ExplorerError saying why when it fails
    (bwrap missing, user namespaces disabled by the kernel or a container's seccomp profile)."""
    launch = worker_launch(
        [sys.executable, "-c", "print('sandbox ok')"], slot=0, scratch_mb=scratch_mb
    )
    try:
        result = subprocess.run(
            launch.argv,
            capture_output=True,
            text=True,
            timeout=60,
            env=launch.env,
            pass_fds=launch.pass_fds,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ExplorerError("the sandbox could not be started", str(err)) from None
    finally:
        launch.release()
    if result.returncode != 0 or "sandbox ok" not in result.stdout:
        raise ExplorerError(
            "the sandbox could not be started",
            f"`bwrap ...` exited with {result.returncode}:\n{result.stderr.strip()}\n"
            "bubblewrap needs user namespaces (sysctl user.max_user_namespaces > 0); "
            "or start the server with --no-sandbox on a machine only you use",
        )
