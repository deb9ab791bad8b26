"""Shared builds for the export tests, exported GPU-less once per session: the seed's pffn, and every
function of examples/suite.py static and dynamic."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run(cmd, cwd=None, env=None, timeout=900):
    result = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert (
        result.returncode == 0
    ), f"{cmd} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return result


def interpreted(script: str, *args, timeout: float = 600, drop=()) -> dict:
    """Run `script` (python -c, from the repository root) in a child process with Triton's
    interpreter on and no GPU, as the CPU driver runs kernels; return the JSON of its last line.
    `drop`: environment variables to take away first."""
    env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    for name in drop:
        env.pop(name, None)
    result = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def without_cuda_env() -> dict:
    """The environment with every CUDA toolkit directory taken off PATH."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and "cuda" not in p.lower()
    )
    env.pop("CUDA_HOME", None)
    env.pop("CUDA_PATH", None)
    env["PYTHON"] = sys.executable
    return env


@pytest.fixture(scope="session")
def pffn_static(tmp_path_factory) -> Path:
    """`mirai build examples/pffn.py` (the CLI), built with build.sh: B=8000, static shapes."""
    out = tmp_path_factory.mktemp("pffn-static")
    run([sys.executable, "-m", "mirai.cli", "build", EXAMPLES / "pffn.py", "-o", out, "--gpuless"])
    run(["bash", "build.sh"], cwd=out, env=without_cuda_env())
    return out


@pytest.fixture(scope="session")
def pffn_dynamic(tmp_path_factory) -> Path:
    """examples/pffn_dynamic.py through the CLI (dynamic batch), built with build.sh."""
    out = tmp_path_factory.mktemp("pffn-dynamic")
    run(
        [
            sys.executable,
            "-m",
            "mirai.cli",
            "build",
            EXAMPLES / "pffn_dynamic.py",
            "-o",
            out,
            "--gpuless",
            "-q",
        ]
    )
    run(["bash", "build.sh"], cwd=out, env=without_cuda_env())
    return out


def tf_check(directory: Path, *args) -> dict:
    """Run tests/export/tf_checks.py in its own process (TensorFlow apart from torch)."""
    import json

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = run(
        [sys.executable, Path(__file__).with_name("tf_checks.py"), directory, *args], env=env
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


SUITE_MODES = ("static", "dynamic")
SUITE_BATCH = 40  # examples/suite.py's B: the static builds' batch


@pytest.fixture(scope="session")
def suite_builds(tmp_path_factory) -> dict[tuple[str, str], Path]:
    """Every function of examples/suite.py built static (at B) and dynamic, each built with build.sh."""
    import mirai

    sys.path.insert(0, str(EXAMPLES))
    from suite import SUITE

    root = tmp_path_factory.mktemp("suite")
    builds = {}
    for name, (fn, samples, _) in SUITE.items():
        for mode in SUITE_MODES:
            out = root / f"{name}-{mode}"
            mirai.build(
                fn,
                samples(SUITE_BATCH),
                output_dir=out,
                dynamic=mode == "dynamic",
                gpu=False,
                progress=False,
            )
            run(["bash", "build.sh"], cwd=out, env=without_cuda_env())
            builds[(name, mode)] = out
    return builds


@pytest.fixture(scope="session")
def host():
    """One worker for the CPU driver (mirai.export.hostdriver), shared by the numeric tests."""
    from mirai.export.hostdriver import HostRunner

    with HostRunner() as runner:
        yield runner


def only_variant(spec: dict) -> dict:
    """What one op of a build without buckets runs (its manifest entry's one variant)."""
    assert len(spec["variants"]) == 1 and spec["variants"][0]["sample"] is None, spec["variants"]
    return spec["variants"][0]
