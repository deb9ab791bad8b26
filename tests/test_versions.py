"""One version table: pyproject.toml's ranges admit exactly the torch/Triton releases of
mirai.gpu.versions, so pip never installs a release that mirai then refuses."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from mirai.gpu import versions

ROOT = Path(__file__).resolve().parents[1]


def ranges() -> dict[str, object]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    return {r.name: r.specifier for r in reqs if r.name in ("torch", "triton")}


def admitted(spec, majors: range, minors: range) -> set[str]:
    return {
        f"{major}.{minor}"
        for major in majors
        for minor in minors
        if spec.contains(f"{major}.{minor}.0") or spec.contains(f"{major}.{minor}.9")
    }


def test_pyproject_admits_exactly_the_known_releases():
    spec = ranges()
    known_torch = {t for t, _ in versions.KNOWN}
    known_triton = {tr for _, tr in versions.KNOWN}
    assert admitted(spec["torch"], range(2, 3), range(0, 30)) == known_torch
    assert admitted(spec["triton"], range(3, 4), range(0, 30)) == known_triton


def test_the_cpu_driver_tritons_are_known_ones():
    assert set(versions.HOST_DRIVER_TRITON) <= {tr for _, tr in versions.KNOWN}
