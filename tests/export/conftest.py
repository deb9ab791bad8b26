"""Shared builds for the export tests: the seed's pffn, exported GPU-less once per session."""

from __future__ import annotations

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
