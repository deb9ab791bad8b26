"""Timing GPU calls against each other: every candidate timed in turn, in rounds.

Small GPU calls (tens of microseconds) drift with clocks and with whatever else the machine runs, so
a candidate timed once, after another, can look faster or slower than it is. `timed_side_by_side`
times each candidate once per round, starting each round one candidate further along, and keeps the
median of its rounds: drift then falls on every candidate alike. The benches (bench/) and `mirai
tune`'s check of its choices inside the op use it. Needs triton (its do_bench) and a GPU.

A call of a few dozen microseconds is often bound by the host: what do_bench then measures is how
fast Python and the launch path enqueue kernels, not how long the kernels run. `graphs=True` times
each candidate as a CUDA graph of its calls (triton's do_bench_cudagraph): GPU time alone, the
measure for choosing between kernels. The candidate must then be capturable (no synchronization,
no host reads of device data), as the generated ops are.
"""

from __future__ import annotations

import statistics


def timed_side_by_side(fns: dict, rounds: int = 5, graphs: bool = False) -> dict:
    """Milliseconds per call of each of `fns` (name -> callable): `rounds` rounds in which each is
    timed once in turn, the median of its rounds; with `graphs`, GPU time of CUDA graph replays."""
    return {
        name: statistics.median(times)
        for name, times in rounds_side_by_side(fns, rounds, graphs).items()
    }


def rounds_side_by_side(fns: dict, rounds: int = 5, graphs: bool = False) -> dict:
    """{name: [ms of each round]}: what `timed_side_by_side` takes the medians of."""
    from triton.testing import do_bench, do_bench_cudagraph

    def once(fn) -> float:
        if graphs:
            return do_bench_cudagraph(fn, rep=40, return_mode="median")
        return do_bench(fn, warmup=5, rep=40, return_mode="median")

    names = list(fns)
    for name in names:  # compile, allocate and warm every candidate first
        do_bench(fns[name], warmup=10, rep=20)
    samples = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            samples[name].append(once(fns[name]))
    return samples


def capturable(fns: dict) -> dict:
    """The candidates of `fns` that can be timed as CUDA graphs (autograd's backward of a peer may
    not be): each is captured once; the others are reported and left out."""
    import torch

    kept = {}
    for name, fn in fns.items():
        try:
            timed_side_by_side({name: fn}, 1, graphs=True)
            kept[name] = fn
        except Exception as err:  # noqa: BLE001 (reported, then left out)
            print(f"{name}: not capturable as a CUDA graph: {type(err).__name__}: {err}")
            torch.cuda.synchronize()
    return kept
