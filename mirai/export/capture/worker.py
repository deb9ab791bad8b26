"""The GPU-less capture worker: `python -m mirai.export.capture.worker REQUEST RESULT`.

A fresh process that loads the fake-CUDA shim before torch (see mirai.export.capture.gpuless), captures one
trace for one target and writes the Capture, or the error, as a pickle. Keeping this in its own process
keeps the patched torch away from the user's process.
"""

from __future__ import annotations

import pickle
import sys
import traceback


def main(argv: list[str]) -> int:
    request_path, result_path = argv
    with open(request_path, "rb") as f:
        request = pickle.load(f)
    try:
        from mirai.export.capture import gpuless

        target = request["target"]  # a mirai.gpu.targets.Target
        gpuless.activate(target)
        from mirai.export.capture import user_ops
        from mirai.export.capture.core import capture_graphs

        user_ops.load(request.get("user_ops", ()))  # before the graph that calls them

        result = {
            "capture": capture_graphs(
                request["trace"],
                target,
                request["precision"],
                gpu=False,
                name=request["name"],
                gemm=request["gemm"],
                tuning=request.get("tuning"),
            )
        }
    except Exception as err:  # reported to the parent, which raises it with this context
        message = f"{type(err).__name__}: {_shorten(str(err))}"
        result = {
            "error": err if _picklable(err) else None,
            "message": message,
            "traceback": "".join(traceback.format_tb(err.__traceback__)) + message,
        }
    with open(result_path, "wb") as f:
        pickle.dump(result, f)
    return 0


def _shorten(message: str, limit: int = 1500) -> str:
    """Torch's dispatcher errors list every backend; the first lines say what went wrong."""
    return message if len(message) <= limit else message[:limit] + " [...]"


def _picklable(err) -> bool:
    try:
        pickle.loads(pickle.dumps(err))
        return True
    except Exception:
        return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
