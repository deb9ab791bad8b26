"""A worker process: imports torch, torch_mlir and triton once, warms them up, then serves requests
one at a time for the server, which talks to it by JSON lines. Each request runs in a fresh child
forked from this warm process (mirai.explorer.isolate); the worker itself never runs user code.

    python -m mirai.explorer.worker '{"tool_timeout_s": 20, "memory_limit_mb": 6144, ...}'

stdin: one request per line, {"id": "...", "request": {...}, "timeout_s": 20}.
stdout: {"ready": true} once warm, then one line per request, {"id": <the request's>, "response":
<the guide's shape>}. Anything else printed (ours, C libraries') goes to stderr, the worker's log,
never into the protocol. The server starts the worker inside the sandbox (mirai.explorer.sandbox)
unless told --no-sandbox.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path


def _log(message: str) -> None:
    print(f"[mirai worker {os.getpid()}] {message}", file=sys.stderr, flush=True)


def main() -> int:
    config = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # stray prints (ours, C libraries') go to the log
    sys.stdout = sys.stderr
    started = time.monotonic()
    import torch

    torch.set_num_threads(1)  # workers run side by side; each uses one core
    from mirai.explorer.execute import execute, runs_nothing
    from mirai.explorer.isolate import Limits, Spare, prepare_worker
    from mirai.explorer.warmup import warm_up

    warm_up(_log)
    prepare_worker()
    scratch = Path(tempfile.gettempdir())
    tool_timeout_s = float(config.get("tool_timeout_s", 20.0))
    default_timeout_s = float(config.get("request_timeout_s", 20.0))
    allowed_user_tools = config.get("allowed_user_tools", [])
    limits = Limits(
        memory_mb=int(config.get("memory_limit_mb", 6144)),
        processes=int(config.get("max_processes", 64)),
        file_mb=int(config.get("max_file_mb", 512)),
        request_uid=config.get("request_uid"),
    )

    def work(message: dict, folder: Path) -> dict:
        timeout_s = float(message.get("timeout_s") or default_timeout_s)
        return execute(
            message["request"],
            workdir=folder,
            tool_timeout_s=min(tool_timeout_s, timeout_s),
            allowed_user_tools=allowed_user_tools,
            triton_cache_dir=str(folder / "triton"),
        )

    spare = Spare(work, limits, scratch)
    _log(f"ready in {time.monotonic() - started:.1f} s")
    protocol.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    protocol.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        timeout_s = float(message.get("timeout_s") or default_timeout_s)
        echoed = runs_nothing(message["request"])  # raw IR echoed: nothing to isolate
        if echoed:
            response = execute(message["request"], workdir=scratch)
        else:
            response = spare.run(message, timeout_s)
        protocol.write(json.dumps({"id": message.get("id"), "response": response}) + "\n")
        protocol.flush()
        if echoed:
            continue  # the spare child was not used: it waits for the next request
        # After the answer: the request's teardown and the next fork are off the client's path.
        if not spare.finish():
            _log("a request's processes outlived the teardown limit: this worker stops")
            return 3
        spare = Spare(work, limits, scratch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
