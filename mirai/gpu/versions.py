"""The torch/Triton versions that mirai's internals-dependent code was written and tested for: one table.

Capture reads Inductor's generated wrapper and kernel modules and patches private APIs for GPU-less
capture; compile and the explorer's Triton IR types drive Triton's compiler with an offline driver;
the CPU driver runs kernels in Triton's interpreter. Those details change between releases. Each pair
in KNOWN was tested end to end; any other fails at once with a clear message instead of producing
wrong kernels. pyproject.toml's ranges admit exactly these releases (a test holds them together).
"""

from __future__ import annotations

from mirai.errors import VersionError

# (torch major.minor, triton major.minor) -> where it was tested
KNOWN = {
    ("2.13", "3.7"): "CPU machines: GPU-less capture, compile, render, TensorFlow build",
    ("2.11", "3.6"): "GPU machine (H200): real torch.compile capture and verification",
}


# Triton releases whose interpreter the CPU driver (mirai.export.hostdriver) runs kernels in: it builds on
# the interpreter's internals (TensorHandle, its patched tl namespace) for its libdevice.
HOST_DRIVER_TRITON = {
    "3.7": "CPU machines: the numeric suite of `make test` (triton 3.7.1)",
}


def check_host_driver() -> str:
    """Return the installed Triton version; raise VersionError if the CPU driver does not know it.
    (Seen on triton 3.6.0 with numpy 2.x: its interpreter fails on Inductor's GEMM templates.)"""
    import triton

    if _major_minor(triton.__version__) not in HOST_DRIVER_TRITON:
        known = ", ".join(f"triton {v}" for v in HOST_DRIVER_TRITON)
        raise VersionError(
            f"the CPU driver runs kernels in Triton's interpreter and was written for {known}; "
            f"found triton {triton.__version__}. Run `mirai verify --cpu` with one of those (the "
            "GPU path, `mirai verify` without --cpu, supports every pair in mirai.gpu.versions.KNOWN)."
        )
    return triton.__version__


def _major_minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def installed() -> dict[str, str]:
    import torch
    import triton

    return {"torch": torch.__version__, "triton": triton.__version__}


def check_triton() -> str:
    """Return the installed Triton version; raise VersionError if no known pair has it (compile
    and the explorer's Triton IR types need Triton alone).

    >>> check_triton() in {triton for triton in installed().values()}
    True
    """
    import triton

    known = sorted({tr for _, tr in KNOWN})
    if _major_minor(triton.__version__) not in known:
        raise VersionError(
            f"mirai drives Triton's compiler as Triton {', '.join(known)} do; found triton "
            f"{triton.__version__}. Install one of those."
        )
    return triton.__version__


def check() -> dict[str, str]:
    """Return the installed versions; raise VersionError for a pair mirai does not know.

    >>> sorted(check())
    ['torch', 'triton']
    """
    found = installed()
    key = (_major_minor(found["torch"]), _major_minor(found["triton"]))
    if key not in KNOWN:
        known = ", ".join(f"torch {t} + triton {tr}" for t, tr in KNOWN)
        raise VersionError(
            f"mirai's capture was written for {known}; found torch {found['torch']} + "
            f"triton {found['triton']}. Install one of the known pairs."
        )
    return found
