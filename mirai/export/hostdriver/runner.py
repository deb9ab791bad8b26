"""`HostRunner`: a worker process that runs generated ops on the CPU, with the launch code unchanged.

Kernels run in Triton's interpreter, which must be switched on before Triton is imported, and the CPU
driver takes the name libcuda.so.1 for its whole process: both need a process of their own, so the
runner keeps one worker and sends it requests. A worker that dies (a kernel that writes out of bounds
can kill it) is reported with the end of what it printed, and the next request starts a fresh one.

    >>> with HostRunner() as cpu:  # doctest: +SKIP
    ...     outputs, grads = cpu.forward_backward("generated", inputs, grad_outputs)
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import tempfile

from mirai.errors import MiraiError
from mirai.export.hostdriver import protocol
from mirai.export.launch import OpError


class HostRunner:
    # the worker's module, and what its environment adds (a subclass may serve another front end)
    WORKER = "mirai.export.hostdriver.worker"
    ENV = {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}

    def __init__(self, timeout: float = 900.0):
        self.timeout = timeout
        self._proc: subprocess.Popen | None = None
        self._log = None
        self.launches: list[tuple[str, str, tuple[int, int, int]]] = []  # of the last request

    def __enter__(self) -> HostRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            self._log = tempfile.TemporaryFile()
            env = dict(os.environ, **self.ENV)
            self._proc = subprocess.Popen(
                [sys.executable, "-m", self.WORKER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                env=env,
            )
        return self._proc

    def _request(self, message: dict) -> dict:
        proc = self._start()
        try:
            protocol.send(proc.stdin, message)
            ready, _, _ = select.select([proc.stdout], [], [], self.timeout)
            answer = protocol.receive(proc.stdout) if ready else None
        except (BrokenPipeError, OSError):
            answer = None
        if answer is None:
            self._fail(message, timed_out=proc.poll() is None)
        self.launches = answer.pop("launches", [])
        if "error" in answer:
            if answer["code"] is not None:
                raise OpError(answer["code"], answer["error"])
            raise MiraiError(f"the CPU run of {message['directory']} failed: {answer['error']}")
        return answer

    def _fail(self, message: dict, timed_out: bool) -> None:
        proc = self._proc
        if timed_out:
            proc.kill()
        code = proc.wait()
        self._log.seek(0)
        tail = self._log.read().decode(errors="replace")[-4000:]
        self._proc = None
        what = f"timed out after {self.timeout:g}s" if timed_out else f"died (exit status {code})"
        raise MiraiError(
            f"the CPU driver's worker {what} running {message['directory']}:\n{tail}".rstrip()
        )

    def forward_backward(self, directory, inputs, grad_outputs):
        """Forward outputs and input gradients, wired as the generated TensorFlow API wires them."""
        answer = self._request(
            {
                "cmd": "forward_backward",
                "directory": str(directory),
                "inputs": list(inputs),
                "grad_outputs": list(grad_outputs),
            }
        )
        return answer["outputs"], answer["grads"]

    def run(self, directory, op: str, inputs):
        """The outputs of one generated op (e.g. "PffnFwd")."""
        answer = self._request(
            {"cmd": "run", "directory": str(directory), "op": op, "inputs": list(inputs)}
        )
        return answer["outputs"]

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
