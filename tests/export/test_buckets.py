"""Bucketed dynamic builds: one op, a variant per batch bucket, picked at run time.

The end-to-end test builds the small pffn dynamic with buckets at batches 4 and 16 and a tuning
table whose only entry puts the gate and up GEMMs in a Triton template at batch 16. So the two
variants differ in kind (three cuBLASLt GEMMs at 4; two templates and one GEMM at 16), and a batch
that ran the wrong variant would launch the wrong kernels. Each batch runs through the generated
launch code on the CPU driver and is compared with the function in float64.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest

import mirai
from mirai.cli.inspect import summary
from mirai.errors import MiraiError
from mirai.export.buckets import make_buckets, plan_variants
from mirai.export.capture import capture
from mirai.export.tuning import GemmEntry, TuningTable
from mirai.export.verify import table as row_table
from mirai.export.verify import verify
from tests.export.conftest import EXAMPLES
from tests.export.test_numerics import pffn_small

sys.path.insert(0, str(EXAMPLES))
from pffn import pffn  # noqa: E402

BUCKETS = [16, 4]  # any order: the build sorts them
LARGE = 16  # the bucket whose GEMMs the table puts in a template


def test_buckets_are_sorted_with_bounds_at_geometric_means_and_bad_ones_are_refused():
    assert make_buckets("64,512") == make_buckets([512, 64])
    assert [(b.sample, b.upto) for b in make_buckets(["512", 64, 8000, 2000, 64])] == [
        (64, 181),
        (512, 1011),
        (2000, 4000),
        (8000, None),
    ]
    for bad, says in (
        ([64], "at least two"),
        ([1, 64], "below 2"),
        ([64, 2.5], "a batch size"),
        ([64, True], "a batch size"),
        ([64, "x"], "a batch size"),
    ):
        with pytest.raises(MiraiError, match=says):
            make_buckets(bad)


def test_buckets_need_a_dynamic_build(tmp_path):
    with pytest.raises(MiraiError, match="buckets are for dynamic builds"):
        mirai.build(pffn, pffn_small(8), tmp_path, buckets=[4, 16], progress=False)


@pytest.fixture(scope="module")
def bucketed(tmp_path_factory):
    """The small pffn built dynamic with buckets 4 and 16 and a table for batch 16; unfused (its
    gate and up projections stay GEMMs, which the table's entry is for)."""
    samples = pffn_small(8)
    templates = capture(pffn, pffn_small(LARGE), gpu=False, gemm="triton")
    gate_up = templates.gemm_timings["forward"][0]
    assert gate_up["chosen"] == "triton"
    table = TuningTable(
        device="NVIDIA H200",
        target="sm_90",
        precision="tf32",
        versions={"torch": "test"},
        gemms={gate_up["key"]: GemmEntry("triton", gate_up["config"])},
    )
    out = tmp_path_factory.mktemp("bucketed")
    result = mirai.build(
        pffn, samples, out, dynamic=True, buckets=BUCKETS, tuning=table, fuse=(), progress=False
    )
    return out, result


def test_each_bucket_is_captured_at_its_batch_and_the_table_applies_at_its_own(bucketed):
    out, _ = bucketed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["buckets"] == [{"sample": 4, "upto": 8}, {"sample": 16, "upto": None}]
    forward = manifest["ops"]["PffnFwd"]
    assert forward["dispatch"] == "s0" and "launches" not in forward
    small, large = forward["variants"]
    assert (small["sample"], small["upto"], large["sample"]) == (4, 8, 16)
    assert len(small["gemms"]) == 3  # the table has nothing at batch 4: cuBLAS
    assert len(large["gemms"]) == 1  # the table's template for gate and up at 16
    assert sum(k.startswith("triton_tem_") for k in large["launches"]) == 2
    assert not any(k.startswith("triton_tem_") for k in small["launches"])
    # every launched kernel is embedded once, under a name of the variant that brought it
    for op in manifest["ops"].values():
        launched = {k for v in op["variants"] for k in v["launches"]}
        assert launched == set(op["kernels"])
        assert all(k.endswith(("_b4", "_b16")) for k in launched)
    text = "\n".join(summary(manifest))
    assert (
        "2 launches and 3 GEMMs captured at s0 = 4; 3 launches and 1 GEMMs captured at s0 = 16"
        in text
    )
    launch_code = (out / "PffnFwd_launch.h").read_text()
    assert "if (sym.s0 <= 8) return 0;" in launch_code
    assert launch_code.count("inline mirai_rt::Status RunVariant") == 2


@pytest.mark.parametrize("batch", [3, 8, 9, 40])
def test_a_bucketed_op_runs_the_variant_of_each_batch_and_computes_right(bucketed, host, batch):
    out, _ = bucketed
    rows = verify(pffn, pffn_small, out, batches=[batch], device="cpu", runner=host)
    assert rows and all(r.ok for r in rows), row_table(rows)
    manifest = json.loads((out / "manifest.json").read_text())
    expected = []
    for op in ("PffnFwd", "PffnBwd"):
        variants = manifest["ops"][op]["variants"]
        chosen = next(v for v in variants if v["upto"] is None or batch <= v["upto"])
        assert chosen["sample"] == (4 if batch <= 8 else 16)
        expected += [(op, k) for k in chosen["launches"]]
    assert [(op, k) for op, k, _grid in host.launches] == expected


def test_variants_whose_interfaces_differ_are_refused(bucketed):
    _, result = bucketed
    cap = result.capture
    changed = dataclasses.replace(
        cap, outputs=tuple(dataclasses.replace(o, dtype="float64") for o in cap.outputs)
    )
    own = {
        graph: {n: result.compiled[graph][n] for n in found} for graph, found in cap.kernels.items()
    }
    buckets = make_buckets([4, 16])
    plan_variants([(buckets[0], cap), (buckets[1], cap)], own)  # the same interface: accepted
    with pytest.raises(MiraiError, match="differ from those captured at 4"):
        plan_variants([(buckets[0], cap), (buckets[1], changed)], own)


def test_a_c_interface_library_exports_its_functions_and_shares_no_state(bucketed):
    # Statics of inline functions (a variant's GEMM plan memo, the runtime's caches) would otherwise
    # be GNU-unique symbols that the dynamic linker merges across every library loaded, even with
    # RTLD_LOCAL: two builds of one op in one process, with other GEMM counts, then wrote past each
    # other's arrays (a crash on the H200 when one process checked several pffn builds).
    import subprocess

    from mirai.export.launch import build_capi

    out, _ = bucketed
    library = build_capi(out, "PffnFwd")
    listed = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    ours = sorted(line.split()[-1] for line in listed if "mirai" in line)
    assert ours == sorted(
        f"mirai_PffnFwd_{name}"
        for name in ("num_symbols", "num_launches", "binaries", "bind", "output_shape", "run")
    ), ours


def test_a_dynamic_build_without_buckets_says_one_variant_serves_every_batch(tmp_path, capsys):
    from tests.export.user_triton_op import samples, user_shift

    mirai.build(user_shift, samples(40), output_dir=tmp_path / "one", dynamic=True)
    err = capsys.readouterr().err
    assert "dynamic, one variant: every batch runs the kernels and configurations chosen at " in err
    assert "the sample batch (40); " in err and "--buckets" in err
    mirai.build(user_shift, samples(40), output_dir=tmp_path / "two", dynamic=True, buckets=[8, 40])
    err = capsys.readouterr().err
    assert "at batches 8, 40" in err and "one variant" not in err
