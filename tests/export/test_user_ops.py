"""A function that calls a Triton kernel of its own (a torch.library.triton_op registered in the
user's module) exports like any other: the GPU-less capture worker imports the module that
registers the operator (mirai.export.capture.user_ops), and the generated op computes what eager
PyTorch computes."""

from __future__ import annotations

import json

from mirai.export.verify import table, verify
from tests.export.user_triton_op import samples, user_shift


def test_a_functions_own_triton_kernel_is_exported_and_computes_right(tmp_path, host):
    import mirai

    mirai.build(user_shift, samples(40), output_dir=tmp_path, dynamic=True, progress=False)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    launches = [
        k for spec in manifest["ops"].values() for v in spec["variants"] for k in v["launches"]
    ]
    assert "scaled_shift_kernel" in launches, launches
    rows = verify(user_shift, samples, tmp_path, batches=[3, 40, 77], device="cpu", runner=host)
    assert {r.batch for r in rows} == {3, 40, 77}
    assert all(r.ok for r in rows), table(rows)


def test_the_cli_exports_a_file_whose_function_calls_its_own_kernel(tmp_path):
    """`mirai build FILE` loads the file under a name of its own (mirai_user_<stem>); the worker
    loads it the same way from its path."""
    import subprocess
    import sys

    from tests.export.conftest import ROOT

    out = tmp_path / "out"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mirai.cli",
            "build",
            "tests/export/user_triton_op.py",
            "-o",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    launches = [
        k for spec in manifest["ops"].values() for v in spec["variants"] for k in v["launches"]
    ]
    assert "scaled_shift_kernel" in launches, launches
