"""bench/profile_pffn.py's side-by-side table of kernels' GPU time per call, and what it reads from
a profile: only the time spent on the device."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from profile_pffn import kernel_times, side_by_side  # noqa: E402


def test_the_table_puts_the_builds_side_by_side_per_call_slowest_kernel_first():
    long_name = (
        "sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize128x128x32_warpgroupsize1x1x1_execute"
    )
    times = {
        "generated B8000": {"silu_grad_kernel": (12045.0, 20), long_name: (9695.0, 60)},
        "generated bucketed": {
            "silu_grad_kernel": (14100.0, 20),
            long_name: (9571.0, 60),
            "Memset (Device)": (63.0, 60),
        },
    }
    lines = side_by_side(times, calls=20, width=40)
    assert lines[0] == "| kernel | generated B8000 | generated bucketed |"
    assert lines[1] == "|---|---|---|"
    # the slowest kernel in any build first; per call: microseconds, then launches in brackets
    assert lines[2] == "| silu_grad_kernel | 602.2 (1) | 705.0 (1) |"
    assert lines[3] == f"| {long_name[:37]}... | 484.8 (3) | 478.6 (3) |"
    # a kernel one build does not run is a dash there
    assert lines[4] == "| Memset (Device) | - | 3.1 (3) |"
    assert lines[5] == "| all kernels | 1087.0 | 1186.7 |"
    assert len(lines) == 6


def test_a_profile_with_no_device_work_has_no_kernel_times():
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.ones(64, 64) @ torch.ones(64, 64)
    assert any(event.key == "aten::mm" for event in prof.key_averages())
    assert kernel_times(prof) == {}
