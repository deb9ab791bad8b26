"""A worker process: imports torch, torch_mlir and triton once, warms them up, then runs requests
(one at a time) for the server, which talks to it by JSON lines.

    python -m mirai.explorer.worker '{"tool_timeout_s": 60, "memory_limit_mb": 6144, ...}'

stdin: one request per line, {"id": "...", "request": {...}, "triton_cache_dir": "..."}.
stdout: {"ready": true} once warm, then one line per request, {"id": <the request's>, "response":
<the guide's shape>}. Anything else
printed (user code, C libraries) goes to stderr, the worker's log, never into the protocol.
The memory limit (RLIMIT_AS, on top of what the warm worker already maps) is set once warm; the time
limit is the server's: it kills a worker that overruns and starts another.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time


def _log(message: str) -> None:
    print(f"[mirai worker {os.getpid()}] {message}", file=sys.stderr, flush=True)


def _limit_memory(extra_mb: int) -> None:
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    limit = mapped + extra_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main() -> int:
    config = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # stray prints (ours, user code's, C libraries') go to the log
    sys.stdout = sys.stderr
    started = time.monotonic()
    import torch

    torch.set_num_threads(1)  # workers run side by side; each uses one core
    from mirai.explorer.execute import execute
    from mirai.explorer.warmup import warm_up

    warm_up(_log)
    _limit_memory(int(config.get("memory_limit_mb", 6144)))
    _log(f"ready in {time.monotonic() - started:.1f} s")
    protocol.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    protocol.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        response = execute(
            message["request"],
            tool_timeout_s=float(config.get("tool_timeout_s", 60.0)),
            allowed_user_tools=config.get("allowed_user_tools", []),
            triton_cache_dir=message.get("triton_cache_dir"),
        )
        protocol.write(json.dumps({"id": message.get("id"), "response": response}) + "\n")
        protocol.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
