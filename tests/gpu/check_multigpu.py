"""Multi-GPU check: the generated pffn launch code on a device other than 0, and on two devices at once.

    python tests/gpu/check_multigpu.py --builds gpuless/     # folders B64/ and dynamic/ from
                                                             # `check_pffn.py --prepare gpuless/`

What it checks, against eager PyTorch on the same device:
- every visible device, one at a time, static and dynamic builds, with inputs that exist only on that
  device (a kernel launched on another device would fault or compute garbage);
- with two or more GPUs, device 1's inputs on a stream of device 1 while device 0 is the thread's
  current device (the launch code switches to the device of its stream itself);
- two threads, each on its own stream, at once: on devices 0 and 1 when there are two GPUs, else two
  streams of device 0 (the per-context kernel cache under concurrency);
- with two or more GPUs, device 1 again from fresh processes with CUDA_VISIBLE_DEVICES unset, "1" and
  "1,0" (so the op's device is not the process's first device), and once more with device 0 current
  when the kernels first load on device 1.

With one GPU the multi-device parts are reported as not run. Results go to --results (JSON, Markdown).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))


def check_on(
    device: int, directory: Path, batch: int, stream=None, seed: int = 0, current=None
) -> float:
    """Max relative error (output and gradients) of the generated code against eager on `device`.

    With `current`, that other device is the thread's current one during the launches (the op runs
    on the current stream of its inputs' device, so it must switch to that device itself)."""
    import contextlib

    import torch

    import pffn as example
    from mirai.export.launch import GeneratedFunction

    dev = torch.device("cuda", device)
    fn = GeneratedFunction(directory)
    g = torch.Generator(device=dev).manual_seed(seed)
    inputs = [
        torch.randn(t.shape, device=dev, generator=g) * t.std()
        for t in example.sample_inputs(batch)
    ]
    grad = torch.randn(batch, example.E, example.D, device=dev, generator=g)
    if stream is None:
        # with `current`: a stream of its own on `device` (torch's default is the NULL stream)
        stream = (
            torch.cuda.Stream(device=dev) if current is not None else torch.cuda.current_stream(dev)
        )
    stream.wait_stream(torch.cuda.current_stream(dev))  # the inputs are ready
    scope = contextlib.ExitStack()
    if current is None:
        scope.enter_context(torch.cuda.device(dev))
        scope.enter_context(torch.cuda.stream(stream))
    else:  # the stream is current on `device` while `current` is the current device
        scope.enter_context(torch.cuda.stream(stream))
        scope.enter_context(torch.cuda.device(current))
    with scope:
        outputs, grads = fn.forward_backward(inputs, [grad])
        assert current is None or torch.cuda.current_device() == current
        assert current is None or torch.cuda.current_stream(dev).cuda_stream != 0
        assert all(t.device == dev for t in outputs + grads)
        x = [t.detach().double().requires_grad_(True) for t in inputs]
        y = example.pffn.fn(*x)
        y.backward(grad.double())
        ref = [y.detach()] + [t.grad for t in x]
    for d in range(torch.cuda.device_count()):  # a fault anywhere is this case's
        torch.cuda.synchronize(d)
    errs = [float((a.double() - b).norm() / b.norm()) for a, b in zip(outputs + grads, ref)]
    return max(errs)


def two_at_once(devices, directory: Path, batch: int, rounds: int = 20) -> list[float]:
    import torch

    results, failures = {}, []

    def work(slot, device):
        try:
            stream = torch.cuda.Stream(device=device)
            results[slot] = max(
                check_on(device, directory, batch, stream, seed=slot * 1000 + r)
                for r in range(rounds)
            )
        except Exception as err:  # reported below
            failures.append(f"thread {slot} on device {device}: {err!r}")

    threads = [threading.Thread(target=work, args=(i, d)) for i, d in enumerate(devices)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise RuntimeError("; ".join(failures))
    return [results[i] for i in range(len(devices))]


def child(args) -> int:
    """Run in a fresh process: check logical device `--device` and print the error as JSON."""
    err = check_on(args.device, args.builds / "B64", 64, current=args.current)
    print(
        json.dumps(
            {
                "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "device": args.device,
                "max_err": err,
            }
        )
    )
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", type=Path, required=True)
    parser.add_argument("--results", type=Path, default=ROOT / "tests" / "gpu" / "results")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--device", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--current", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)

    import torch

    count = torch.cuda.device_count()
    if count == 0:
        print("check_multigpu: no CUDA device", file=sys.stderr)
        return 2
    from mirai.export.verify import tolerance

    tol = max(
        tolerance(json.loads((args.builds / b / "manifest.json").read_text()))
        for b in ("B64", "dynamic")
    )
    lines, ok = [], True

    def note(text: str) -> None:  # printed as it happens, so a crash shows how far it got
        lines.append(text)
        print(text, flush=True)

    for device in range(count):
        for build, batch in (("B64", 64), ("dynamic", 64), ("dynamic", 2000)):
            err = check_on(device, args.builds / build, batch)
            ok &= err <= tol
            note(f"- device {device}, {build} build, B={batch}: max rel err {err:.2e}")
    if count >= 2:
        err = check_on(1, args.builds / "dynamic", 2000, current=0)
        ok &= err <= tol
        note(f"- device 1 while device 0 is current, dynamic build, B=2000: {err:.2e}")
    pair = [0, 1] if count >= 2 else [0, 0]
    errs = two_at_once(pair, args.builds / "dynamic", 2000)
    ok &= max(errs) <= tol
    where = "devices 0 and 1" if count >= 2 else "two streams of device 0 (one GPU)"
    note(
        f"- two threads at once on {where}, 20 rounds each: max rel err "
        + ", ".join(f"{e:.2e}" for e in errs)
    )
    if count >= 2:
        # the last: the kernels' first load on device 1 happens while device 0 is current
        for visible, device, current in (
            (None, 1, None),
            ("1", 0, None),
            ("1,0", 0, None),
            (None, 1, 0),
        ):
            env = dict(os.environ)
            env.pop("CUDA_VISIBLE_DEVICES", None)
            if visible is not None:
                env["CUDA_VISIBLE_DEVICES"] = visible
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    "--builds",
                    str(args.builds),
                    "--device",
                    str(device),
                ]
                + (["--current", str(current)] if current is not None else []),
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            case = f"CUDA_VISIBLE_DEVICES={visible}, physical device 1" + (
                f", fresh process, device {current} current" if current is not None else ""
            )
            if out.returncode != 0:
                ok = False
                note(f"- {case}: FAILED {out.stderr[-500:]}")
                continue
            seen = json.loads(out.stdout.strip().splitlines()[-1])
            ok &= seen["max_err"] <= tol
            note(f"- {case}: max rel err {seen['max_err']:.2e}")
    else:
        note("- device 1 with CUDA_VISIBLE_DEVICES unset, 1 and 1,0: not run (one GPU)")
    text = (
        f"# Multi-GPU check\n\n{count} x {torch.cuda.get_device_name()}, torch "
        f"{torch.__version__}; tolerance {tol:g}: {'PASSED' if ok else 'FAILED'}\n\n"
        + "\n".join(lines)
        + "\n"
    )
    print(text)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "check_multigpu.md").write_text(text)
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / "check_multigpu.md").write_text(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
