"""The worker process of `HostRunner`: runs generated ops on the CPU driver, one request at a time.

Started as `python -m mirai.export.hostdriver.worker` with TRITON_INTERPRET=1. Requests and answers travel on
its stdin and a private copy of its stdout (mirai.export.hostdriver.protocol); anything else the process
prints goes to stderr, so a library's message cannot corrupt an answer. `run` is the serving loop,
with the handler of each request kind; the C interface's are here, the JAX front end's in
mirai.export.frameworks.jax_cpu.
"""

from __future__ import annotations

import os
import sys


def serve(inp, out, handlers: dict) -> None:
    """Answer requests until the input closes: `handlers[cmd](host, request)` gives an answer's
    fields; every answer also lists the kernels launched for it, and an error its message."""
    from mirai.export.hostdriver import driver, protocol

    host = driver.get()  # first: the stand-in must be the process's libcuda.so.1
    from mirai.export.launch import OpError

    while True:
        request = protocol.receive(inp)
        if request is None:
            return
        start = len(host.launches)
        try:
            handler = handlers.get(request["cmd"])
            if handler is None:
                raise ValueError(f"unknown request {request['cmd']!r}")
            answer = handler(host, request)
        except OpError as err:
            answer = {"error": str(err), "code": err.code}
        except Exception as err:  # noqa: BLE001 - the parent raises it with its message
            answer = {"error": f"{type(err).__name__}: {err}", "code": None}
        answer["launches"] = host.launches[start:]
        protocol.send(out, answer)


def run(handlers: dict) -> None:
    """Serve on stdin and a private copy of stdout; the process's own stdout goes to stderr."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, out, handlers)


def c_interface_handlers() -> dict:
    """The requests of `HostRunner`: a whole function forward and backward, or one op."""
    from mirai.export.launch import GeneratedFunction, GeneratedOp

    functions: dict[str, GeneratedFunction] = {}
    ops: dict[tuple[str, str], GeneratedOp] = {}

    def forward_backward(host, request) -> dict:
        directory = request["directory"]
        if directory not in functions:
            functions[directory] = GeneratedFunction(directory, host=True, check_inputs=True)
        outputs, grads = functions[directory].forward_backward(
            request["inputs"], request["grad_outputs"]
        )
        return {"outputs": outputs, "grads": grads}

    def run_op(host, request) -> dict:
        key = (request["directory"], request["op"])
        if key not in ops:
            ops[key] = GeneratedOp(*key, host=True, check_inputs=True)
        return {"outputs": ops[key](request["inputs"])}

    return {"forward_backward": forward_backward, "run": run_op}


def main() -> None:
    run(c_interface_handlers())


if __name__ == "__main__":
    main()
