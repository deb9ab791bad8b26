"""The host-time harness (bench/host_time.cc, driven by bench/bench_host_time.py): it builds with g++
alone, and it runs a generated op end to end through the op's C interface on the CPU stand-ins for
the driver and cuBLASLt, which count what it launched (the stand-in interprets every kernel, so the
times mean nothing and the calls are few)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import mirai

from tests.export.conftest import EXAMPLES, ROOT, only_variant, run

HARNESS = ROOT / "bench" / "host_time.cc"
DRIVER = ROOT / "bench" / "bench_host_time.py"
WARMUP, CALLS, SYNC_CALLS = 1, 2, 1


@pytest.mark.parametrize("library", [False, True], ids=["executable", "library"])
def test_harness_builds_with_gpp_alone(tmp_path, library):
    # no CUDA headers or libraries: the driver is opened at run time
    flags = ["-shared", "-fPIC", "-DMIRAI_HOST_TIME_LIBRARY"] if library else []
    out = tmp_path / ("host_time.so" if library else "host_time")
    run(
        [
            "g++",
            "-std=c++17",
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            *flags,
            HARNESS,
            "-o",
            out,
            "-ldl",
        ]
    )
    symbols = run(["nm", "-D", "--defined-only", out]).stdout
    assert ("mirai_host_time_main" in symbols) == library


def harness(*args, timeout=1200) -> subprocess.CompletedProcess:
    """bench/bench_host_time.py with `args`; what it printed and returned."""
    return subprocess.run(
        [sys.executable, DRIVER, *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def short_run(results) -> list:
    """The tiny counts CI runs the harness with, and where its JSON goes."""
    return ["--warmup", WARMUP, "--calls", CALLS, "--sync-calls", SYNC_CALLS, "--json", results]


@pytest.fixture(scope="module")
def mlp_dynamic(tmp_path_factory):
    """examples/suite.py's mlp, dynamic: its GEMMs in cuBLASLt and Triton kernels around them."""
    sys.path.insert(0, str(EXAMPLES))
    from suite import SUITE

    fn, samples, _ = SUITE["mlp"]
    out = tmp_path_factory.mktemp("mlp-dynamic")
    mirai.build(fn, samples(8), output_dir=out, dynamic=True, gpu=False, progress=False)
    return out


def test_harness_runs_every_op_on_the_cpu_driver(mlp_dynamic, tmp_path):
    results = tmp_path / "results.json"
    done = harness(mlp_dynamic, "--cpu", "--batches", "5", *short_run(results))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    manifest = json.loads((mlp_dynamic / "manifest.json").read_text())
    seen = json.loads(results.read_text())
    assert [r["op"] for r in seen] == ["MlpFwd", "MlpBwd"]
    calls = WARMUP + CALLS + SYNC_CALLS
    for r in seen:
        spec = only_variant(manifest["ops"][r["op"]])
        assert r["batch"] == 5 and "[5,64]" in r["inputs"]
        assert (r["kernels"], r["gemms"]) == (len(spec["launches"]), len(spec["gemms"]))
        assert r["launches"] == r["kernels"] + r["gemms"] + r["copies"]
        # what the stand-ins ran: every launch and GEMM of every call, nothing else
        assert r["cpu_driver"] == {
            "kernel_launches": calls * r["kernels"],
            "gemms": calls * r["gemms"],
        }
        assert r["nonfinite_outputs"] == 0  # outputs start as NaN: every element was written
        assert r["host_us"] > 0 and r["sync_us"] > 0
        assert r["floor_us"] is None and r["ratio"] is None  # no empty kernel on the stand-in
        # one block of temporaries and one of scratch memory (the GEMMs' workspace), at most
        assert 1 <= r["allocations_per_call"] <= 2
        assert f"| {r['op']} | 5 | {r['launches']} (" in done.stdout


def test_a_static_build_runs_only_at_its_own_batch(tmp_path):
    # the shapes come from the manifest alone: a static build's are numbers
    manifest = {
        "symbols": {},
        "inputs": [{"name": "x", "dtype": "float32", "sizes": ["8", "64"]}],
        "ops": {"MlpFwd": {"graph": "forward", "inputs": [], "outputs": []}},
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    done = harness(tmp_path, "--cpu", "--batches", "9", timeout=600)
    assert done.returncode == 1
    assert "is a static build for B=8; it cannot run at B=9" in done.stderr


def test_harness_takes_temporaries_from_a_stream_ordered_allocator(mlp_dynamic, tmp_path):
    # --alloc async: cuMemAllocAsync per request, cuMemFreeAsync after each call
    done = harness(
        *[mlp_dynamic, "--cpu", "--batches", "3", "--ops", "MlpFwd", "--alloc", "async"],
        *[
            "--warmup",
            "1",
            "--calls",
            "1",
            "--sync-calls",
            "0",
            "--json",
            tmp_path / "results.json",
        ],
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (r,) = json.loads((tmp_path / "results.json").read_text())
    assert r["alloc"] == "async" and r["op"] == "MlpFwd" and r["nonfinite_outputs"] == 0
    assert r["cpu_driver"]["gemms"] == 2 * r["gemms"]


def test_a_dry_run_counts_every_launch_and_runs_none(mlp_dynamic, tmp_path):
    """--dry: the stand-ins check and count every launch and GEMM but run none, so what the harness
    times is the launch code's own host work; outputs stay as the harness filled them (NaN)."""
    results = tmp_path / "results.json"
    done = harness(
        mlp_dynamic, "--cpu", "--dry", "--batches", "5", *short_run(results), timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Dry run on the CPU stand-ins" in done.stdout
    calls = WARMUP + CALLS + SYNC_CALLS
    for r in json.loads(results.read_text()):
        assert r["cpu_driver"] == {
            "kernel_launches": calls * r["kernels"],
            "gemms": calls * r["gemms"],
        }
        assert r["nonfinite_outputs"] > 0  # nothing was written
        assert r["host_us"] > 0
    refused = harness(mlp_dynamic, "--dry", timeout=60)
    assert (
        refused.returncode == 2 and "--dry runs on the CPU stand-ins: add --cpu" in refused.stderr
    )
