"""The explorer's settings: one class, built by the CLI (or from env vars), read by `create_app`, which
makes the service, the job store and the permalink store from it; tests start the server with flags.
Tool locations are not settings: they come from TORCH_MLIR_OPT_PATH, LLVM_BIN_PATH, TRITON_OPT_PATH or
$PATH, as the integration guide says (see `mirai.explorer.tools`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from mirai.explorer.permalinks_store import default_db_path

STATIC_DIR = Path(__file__).parent / "static"


class Settings(BaseModel):
    """Everything an operator can tune. Env vars MIRAI_EXPLORER_<FIELD> override the defaults."""

    workers: int = Field(2, ge=1, description="pre-warmed worker processes")
    queue_size: int = Field(
        16, ge=0, description="requests that may wait for a worker; more are 'busy'"
    )
    request_timeout_s: float = Field(20.0, gt=0, description="wall-clock limit of one request")
    tool_timeout_s: float = Field(
        20.0,
        gt=0,
        description="limit of one pipeline stage (subprocess); at most the request's limit",
    )
    max_body_mb: float = Field(4.0, gt=0, description="largest request body (MiB); more is a 413")
    memory_limit_mb: int = Field(
        6144, ge=256, description="address space a request may add to a worker"
    )
    cache_entries: int = Field(512, ge=0, description="successful results kept in the result cache")
    cache_dir: Path = Field(
        default_factory=lambda: Path(tempfile.gettempdir()) / f"mirai-explorer-{os.getpid()}",
        description="root of the per-code Triton caches",
    )
    allowed_user_tools: list[str] = Field(
        default_factory=list,
        description="executables `user_tool` may name (by name, found on $PATH)",
    )
    static_dir: Path = Field(STATIC_DIR, description="the built web page, served at /")
    max_worker_requests: int = Field(
        500, ge=1, description="requests a worker serves before it is replaced by a fresh one"
    )
    job_ttl_s: float = Field(3600.0, gt=0, description="how long a finished job's result is kept")
    max_jobs: int = Field(256, ge=1, description="jobs kept at once (oldest finished ones dropped)")
    permalinks_db: Path = Field(
        default_factory=default_db_path,
        description="the SQLite file of saved page states (MIRAI_EXPLORER_PERMALINKS_DB)",
    )
    sandbox: bool = Field(
        True, description="run workers in bubblewrap (off only for one user on their own machine)"
    )
    any_user_tool: bool = Field(
        False, description="`user_tool` may run any executable, by name or path (one user only)"
    )
    scratch_mb: int = Field(
        1024, ge=16, description="size of a sandbox's writable tmpfs (MiB), shared by its requests"
    )
    max_processes: int = Field(64, ge=4, description="processes one request may run at once")
    max_file_mb: int = Field(512, ge=1, description="largest file a request may write (MiB)")
    broker: str | None = Field(
        None,
        description="redis://HOST:PORT/N: jobs, results, cancellation and permalinks in Redis, "
        "served by `mirai worker` pools on any host (none: the embedded pool and stores)",
    )
    max_tries: int = Field(
        2, ge=1, description="broker mode: runs of a job whose worker was lost, before it fails"
    )
    queue_wait_s: float = Field(
        600.0, gt=0, description="broker mode: a job no worker has taken by then fails"
    )

    @classmethod
    def from_env(cls, **overrides) -> "Settings":
        """Defaults, then MIRAI_EXPLORER_* env vars, then explicit overrides (e.g. CLI flags)."""
        values: dict = {}
        for name, field in cls.model_fields.items():
            raw = os.environ.get(f"MIRAI_EXPLORER_{name.upper()}")
            if raw is None:
                continue
            values[name] = _split_list(raw) if name == "allowed_user_tools" else raw
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def worker_config(self) -> dict:
        """What a worker process needs to know (sent as JSON when it starts). A tool's time limit
        longer than the request's would never be reached: it is cut to the request's."""
        return {
            "tool_timeout_s": min(self.tool_timeout_s, self.request_timeout_s),
            "request_timeout_s": self.request_timeout_s,
            "memory_limit_mb": self.memory_limit_mb,
            "max_processes": self.max_processes,
            "max_file_mb": self.max_file_mb,
            "allowed_user_tools": self.user_tool_allowlist(),
        }

    def user_tool_allowlist(self) -> list[str]:
        """What `user_tool` may run: the allowed names, and "*" (anything) with any_user_tool."""
        return [*self.allowed_user_tools, *(["*"] if self.any_user_tool else [])]


def _split_list(raw: str) -> list[str]:
    return [item for item in raw.replace(",", " ").split() if item]
