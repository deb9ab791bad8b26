"""The worker process of `HostRunner`: runs generated ops on the CPU driver, one request at a time.

Started as `python -m mirai.export.hostdriver.worker` with TRITON_INTERPRET=1. Requests and answers travel on
its stdin and a private copy of its stdout (mirai.export.hostdriver.protocol); anything else the process
prints goes to stderr, so a library's message cannot corrupt an answer.
"""

from __future__ import annotations

import os
import sys


def _serve(inp, out) -> None:
    from mirai.export.hostdriver import driver, protocol
    from mirai.export.launch import GeneratedFunction, GeneratedOp, OpError

    functions: dict[str, GeneratedFunction] = {}
    ops: dict[tuple[str, str], GeneratedOp] = {}
    host = driver.get()
    while True:
        request = protocol.receive(inp)
        if request is None:
            return
        directory = request["directory"]
        start = len(host.launches)
        try:
            if request["cmd"] == "forward_backward":
                if directory not in functions:
                    functions[directory] = GeneratedFunction(
                        directory, host=True, check_inputs=True
                    )
                outputs, grads = functions[directory].forward_backward(
                    request["inputs"], request["grad_outputs"]
                )
                answer = {"outputs": outputs, "grads": grads}
            elif request["cmd"] == "run":
                key = (directory, request["op"])
                if key not in ops:
                    ops[key] = GeneratedOp(directory, request["op"], host=True, check_inputs=True)
                answer = {"outputs": ops[key](request["inputs"])}
            else:
                raise ValueError(f"unknown request {request['cmd']!r}")
        except OpError as err:
            answer = {"error": str(err), "code": err.code}
        except Exception as err:  # noqa: BLE001 - the parent raises it with its message
            answer = {"error": f"{type(err).__name__}: {err}", "code": None}
        answer["launches"] = host.launches[start:]
        protocol.send(out, answer)


def main() -> None:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    main()
