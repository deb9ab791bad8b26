"""Tune once, build anywhere: a tuning table steers a GPU-less build, which still computes right.

CI has no GPU to measure on, so the tables here are written from GPU-less captures' own records
(the blocks a Triton-template build gave a GEMM, a kernel's candidate configurations) with the
choices changed from what the build would take by itself. What is checked: the build follows the
table wherever a key matches, says so kernel by kernel and GEMM by GEMM, and its numbers are right
on the CPU driver; a table for another target or precision, a broken file, or a table on a GPU
build are refused with a clear error.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

import mirai
from mirai.errors import MiraiError
from mirai.export.build import tuning_coverage
from mirai.export.capture.configs import ONLY_CONFIG
from mirai.export.capture import capture
from mirai.export.tuning import GemmEntry, TuningTable, kernel_key, size_hints
from mirai.export.verify import table as row_table
from mirai.export.verify import verify
from tests.export.conftest import EXAMPLES, only_variant
from tests.export.test_numerics import pffn_small

sys.path.insert(0, str(EXAMPLES))
from pffn import pffn  # noqa: E402

BATCH = 16


def empty_table(**changes) -> TuningTable:
    fields = dict(device="NVIDIA H200", target="sm_90", precision="tf32", versions={})
    fields.update(changes)
    return TuningTable(**fields)


def test_a_table_survives_its_file_and_a_broken_file_is_refused(tmp_path):
    table = empty_table(
        versions={"torch": "2.11.0"},
        gemms={
            "float32:8x64x256,8x256x1024->8x64x1024": GemmEntry(
                "triton",
                {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 3, "num_warps": 4},
                {"cublas": 0.011, "triton": 0.009},
            ),
            "float32:8x8000x256,8x256x1024->8x8000x1024": GemmEntry("cublas", {}, {"cublas": 0.1}),
        },
        kernels={
            "forward:triton_poi_fused_0:x=1024": {
                "kwargs": {"XBLOCK": 128},
                "num_warps": 4,
                "num_stages": 1,
            }
        },
    )
    path = table.save(tmp_path / "t.json")
    again = TuningTable.load(path)
    assert again.to_json() == table.to_json()
    assert again.gemms["float32:8x64x256,8x256x1024->8x64x1024"].config["BLOCK_K"] == 32
    assert "NVIDIA H200 (torch 2.11.0)" in again.origin

    broken = json.loads(path.read_text())
    broken["gemms"]["float32:8x64x256,8x256x1024->8x64x1024"]["kind"] = "cutlass"
    (tmp_path / "kind.json").write_text(json.dumps(broken))
    with pytest.raises(MiraiError, match="cutlass"):
        TuningTable.load(tmp_path / "kind.json")
    (tmp_path / "schema.json").write_text(json.dumps({"gemms": {}}))
    with pytest.raises(MiraiError, match="schema 2"):
        TuningTable.load(tmp_path / "schema.json")
    (tmp_path / "text.json").write_text("not json")
    with pytest.raises(MiraiError, match="cannot read the tuning table"):
        TuningTable.load(tmp_path / "text.json")
    with pytest.raises(MiraiError, match="no tuning table at"):
        TuningTable.load(tmp_path / "missing.json")


def test_the_op_check_turns_back_templates_of_a_graph_whose_op_ran_slower(tmp_path):
    """mirai tune's whole-op check (TuningTable.op_checked): a graph keeps its templates only if
    its op ran faster with them in every round; a GEMM key both graphs share needs both verdicts;
    cuBLAS entries are left as they are; the check survives the file."""
    blocks = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 3, "num_warps": 4}
    template = GemmEntry("triton", blocks, {"cublas": 0.04, "triton": 0.017})
    table = empty_table(
        gemms={
            "fwd-only": template,
            "bwd-only": template,
            "both": template,
            "cublas": GemmEntry("cublas", {}, {"cublas": 0.01, "triton": 0.02}),
        }
    )
    times = {  # GPU time of each op, each round
        "forward": {"table": [0.070, 0.069, 0.071], "cublas": [0.074, 0.073, 0.075]},
        "backward": {"table": [0.241, 0.240, 0.243], "cublas": [0.158, 0.159, 0.158]},
    }
    keys = {"forward": {"fwd-only", "both", "cublas"}, "backward": {"bwd-only", "both"}}
    checked = table.op_checked(keys, times)
    kinds = {k: e.kind for k, e in checked.gemms.items()}
    assert kinds == {
        "fwd-only": "triton",
        "bwd-only": "cublas",
        "both": "cublas",
        "cublas": "cublas",
    }
    assert checked.gemms["fwd-only"].config == blocks
    assert checked.gemms["bwd-only"].config == {}
    both = checked.gemms["both"].op_check
    assert both["kept"] is False and both["template"] == blocks
    assert both["graphs"]["forward"] == {
        "table": 0.070,
        "cublas": 0.074,
        "rounds": times["forward"],
    }
    assert both["graphs"]["backward"]["rounds"] == times["backward"]
    assert checked.gemms["cublas"].op_check == {}
    assert checked.gemms["bwd-only"].ms == template.ms  # autotuning's own times stay
    again = TuningTable.load(checked.save(tmp_path / "checked.json"))
    assert again.to_json() == checked.to_json()
    # a graph that was not timed (no backward op) leaves its templates alone
    assert table.op_checked(keys, {"forward": times["forward"]}).gemms["bwd-only"].kind == "triton"
    # a win of the medians inside the rounds' spread is noise: the template goes back to cuBLAS
    close = {"forward": {"table": [0.070, 0.069, 0.075], "cublas": [0.074, 0.073, 0.075]}}
    assert table.op_checked(keys, close).gemms["fwd-only"].kind == "cublas"


def test_a_table_for_another_target_precision_or_a_gpu_build_is_refused(tmp_path):
    samples = pffn_small(BATCH)
    with pytest.raises(MiraiError, match="measured for sm_80 at precision tf32"):
        mirai.build(pffn, samples, tmp_path, tuning=empty_table(target="sm_80"), progress=False)
    with pytest.raises(MiraiError, match="this build is for sm_90 at ieee"):
        mirai.build(pffn, samples, tmp_path, precision="ieee", tuning=empty_table(), progress=False)
    with pytest.raises(MiraiError, match="a tuning table is for GPU-less builds"):
        mirai.build(pffn, samples, tmp_path, gpu=True, tuning=empty_table(), progress=False)


def test_mirai_tune_says_it_needs_a_gpu_and_build_names_a_missing_table(tmp_path):
    cli = [sys.executable, "-m", "mirai.cli"]
    tune = subprocess.run(
        cli + ["tune", str(EXAMPLES / "pffn.py"), "--batches", "64,512", "-o", tmp_path / "t.json"],
        capture_output=True,
        text=True,
    )
    assert tune.returncode == 2
    assert "mirai tune measures on a GPU" in tune.stderr
    assert not (tmp_path / "t.json").exists()
    build = subprocess.run(
        cli
        + ["build", str(EXAMPLES / "pffn.py"), "--tuning", tmp_path / "none.json", "-o", tmp_path],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 2
    assert f"no tuning table at {tmp_path / 'none.json'}" in build.stderr


def other_config(kernel) -> dict:
    """A launch configuration of `kernel` other than the one its GPU-less pick took: the same
    blocks with another XBLOCK (rows per program), which any pointwise or reduction kernel takes."""
    config = json.loads(json.dumps(kernel.config))
    xblock = config["kwargs"]["XBLOCK"]
    config["kwargs"]["XBLOCK"] = 8 if xblock != 8 else 32
    return {k: config[k] for k in ("kwargs", "num_warps", "num_stages")}


def test_a_gpuless_build_takes_the_tables_choices_and_computes_right(tmp_path, host):
    samples = pffn_small(BATCH)
    # The blocks a Triton-template build gives each GEMM: the table's "measured" templates.
    templates = capture(pffn, samples, gpu=False, gemm="triton")
    gate_up = templates.gemm_timings["forward"][0]
    assert gate_up["chosen"] == "triton" and gate_up["source"] == "GPU-less default"

    # unfused: the gate and up projections stay the GEMMs the table's entry is for
    plain = mirai.build(pffn, samples, tmp_path / "plain", fuse=(), progress=False)
    plain_manifest = json.loads((tmp_path / "plain" / "manifest.json").read_text())
    assert (
        len(only_variant(plain_manifest["ops"]["PffnFwd"])["gemms"]) == 3
    )  # GPU-less default: cuBLAS
    # a backward kernel with several candidate configurations (a reduction, here)
    kernel = next(
        k
        for k in plain.capture.kernels["backward"].values()
        if "rows per program" in k.config_origin
    )
    config = other_config(kernel)
    hints = size_hints(kernel.source)
    assert hints, kernel.source[:400]

    table = empty_table(
        versions={"torch": "test"},
        gemms={gate_up["key"]: GemmEntry("triton", gate_up["config"])},
        kernels={kernel_key("backward", kernel.name, hints): config},
    )
    tuned = mirai.build(pffn, samples, tmp_path / "tuned", tuning=table, fuse=(), progress=False)
    cap = tuned.capture
    assert table.origin in cap.origin

    # the gate and up GEMMs became that template; a backward GEMM of the same sizes reads its
    # operands with other strides, so its key differs and it stays as it was
    from_table = {
        graph: [c for c in found if c["source"] == table.origin]
        for graph, found in cap.gemm_timings.items()
    }
    assert len(from_table["forward"]) == 2 and not from_table["backward"], cap.gemm_timings
    from_table = from_table["forward"]
    assert all(c["key"] == gate_up["key"] for c in from_table)
    assert all(c["chosen"] == "triton" and c["config"] == gate_up["config"] for c in from_table)
    # a tf32 table's template runs TF32 as where it was timed, whatever this torch's size rule
    assert all("ALLOW_TF32=True" in c["template"] for c in from_table), from_table
    manifest = json.loads((tmp_path / "tuned" / "manifest.json").read_text())
    forward = manifest["ops"]["PffnFwd"]
    assert len(only_variant(forward)["gemms"]) == 1  # the down projection stays in cuBLAS
    assert any(name.startswith("triton_tem_") for name in forward["kernels"])
    # the backward kernel runs the table's configuration, and says where it came from
    chosen = manifest["ops"]["PffnBwd"]["kernels"][kernel.name]
    assert chosen["config"]["kwargs"] == config["kwargs"]
    assert chosen["config"]["num_warps"] == config["num_warps"]
    assert chosen["config_origin"] == table.origin
    note = tuning_coverage(cap, table)
    assert f"set 1 of {sum(len(k) for k in cap.kernels.values())} kernel configurations" in note
    assert f"measured under torch test, built under {torch.__version__}" in note
    # the kernels with configurations to choose from that the table did not set are named
    missed = [
        f"{graph} {k.entry}"
        for graph, found in sorted(cap.kernels.items())
        for k in found.values()
        if k.config_origin not in (table.origin, ONLY_CONFIG)
    ]
    assert missed and f"not in the table: {missed[0]}" in note, note
    assert kernel.name not in note.split("not in the table:")[1], note

    rows = verify(pffn, pffn_small, tmp_path / "tuned", device="cpu", runner=host)
    assert rows and all(r.ok for r in rows), row_table(rows)


def test_an_inference_build_takes_the_tables_inference_entries_not_the_training_forwards():
    # layer_norm's inference forward has a kernel named as its training forward's, which also
    # writes the mean and rstd for the backward: tables key them apart ("inference" and "forward",
    # mirai.export.tuning.table_graph), as `mirai tune --inference` writes them
    from suite import SUITE

    fn, samples, _ = SUITE["layer_norm"]
    inference = fn.for_inference()
    training = capture(fn, samples(256), gpu=False)
    plain = capture(inference, samples(256), gpu=False)
    assert plain.backward is None
    kernel = next(iter(plain.kernels["forward"].values()))
    assert kernel.name in training.kernels["forward"]
    assert kernel.source != training.kernels["forward"][kernel.name].source
    hints, config = size_hints(kernel.source), other_config(kernel)

    def taken(table) -> dict:
        chosen = capture(inference, samples(256), gpu=False, tuning=table).kernels["forward"]
        return chosen[kernel.name]

    training_entry = empty_table(kernels={kernel_key("forward", kernel.name, hints): config})
    assert taken(training_entry).config_origin != training_entry.origin
    inference_entry = empty_table(kernels={kernel_key("inference", kernel.name, hints): config})
    chosen = taken(inference_entry)
    assert chosen.config_origin == inference_entry.origin
    assert chosen.config["kwargs"] == config["kwargs"]


def test_a_function_with_nothing_to_differentiate_reads_the_inference_entries():
    # int_only has no backward: its forward writes no residuals, as an inference build's, and
    # its table's entries are keyed so (bench/tuning/suite-h200-tf32/int_only.json)
    from suite import SUITE

    table = TuningTable.load(
        EXAMPLES.parent / "bench" / "tuning" / "suite-h200-tf32" / "int_only.json"
    )
    assert table.kernels and all(k.startswith("inference:") for k in table.kernels)
    fn, samples, _ = SUITE["int_only"]
    cap = capture(fn, samples(65536), gpu=False, tuning=table)
    assert cap.backward is None
    kernels = list(cap.kernels["forward"].values())
    assert kernels and all(k.config_origin == table.origin for k in kernels)


@pytest.mark.parametrize("batch", [64, 512])
def test_the_h200_table_still_matches_what_this_torch_captures(batch):
    # bench/tuning/pffn-h200-tf32.json was measured by `mirai tune` on an H200 under torch 2.11;
    # CI builds with torch 2.13. Its GEMM keys (sizes and strides) and kernel keys (names and size
    # hints) must still meet this capture's: every one of pffn's 9 GEMMs takes the table's choice
    # (cuBLAS everywhere: the op check, every round, found the ops faster without the templates
    # autotuning picked), and kernels take its configurations.
    from pffn import sample_inputs

    table = TuningTable.load(EXAMPLES.parent / "bench" / "tuning" / "pffn-h200-tf32.json")
    assert table.versions["torch"].startswith("2.11")
    cap = capture(pffn, sample_inputs(batch), gpu=False, tuning=table)
    choices = [c for found in cap.gemm_timings.values() for c in found]
    assert len(choices) == 9
    assert all(c["source"] == table.origin for c in choices), choices
    assert all(c["chosen"] == table.gemms[c["key"]].kind for c in choices)
    assert all(c["chosen"] == "cublas" for c in choices), choices
    kernels = [k for graph in cap.kernels.values() for k in graph.values()]
    tuned = [k for k in kernels if k.config_origin == table.origin]
    assert len(tuned) >= 2, [(k.name, k.config_origin) for k in kernels]


@pytest.mark.parametrize("inference", [False, True], ids=["training", "inference"])
@pytest.mark.parametrize("name", ["layer_norm", "rms_norm_residual"])
def test_the_suite_tables_still_match_what_this_torch_captures(name, inference):
    # bench/tuning/suite-h200-tf32/<function>.json, measured on an H200 under torch 2.11 at
    # B = 1024 and 65536 (`check_suite.py --tune --inference`): a GPU-less capture at 65536 under
    # this torch takes every kernel's configuration from the table, for the training build and
    # for the inference build (the bucketed suite bench depends on it).
    from suite import SUITE

    table = TuningTable.load(
        EXAMPLES.parent / "bench" / "tuning" / "suite-h200-tf32" / f"{name}.json"
    )
    assert table.versions["torch"].startswith("2.11")
    fn, samples, _ = SUITE[name]
    if inference:
        fn = fn.for_inference()
    cap = capture(fn, samples(65536), gpu=False, tuning=table)
    kernels = [k for graph in cap.kernels.values() for k in graph.values()]
    assert len(kernels) >= (1 if inference else 3)
    assert all(k.config_origin == table.origin for k in kernels), [
        (k.name, k.config_origin) for k in kernels
    ]


def test_a_dynamic_build_leaves_a_tables_template_that_would_not_fit_its_shared_memory():
    # The H200 timed its templates at static sizes, where Triton keeps no more pipeline stages than
    # the K loop has iterations. At B=64 the weight gradient x^T @ dy (K = the batch) won with
    # 128x128x64 blocks and 5 stages; with a dynamic batch all 5 stages stay (5 * (128*64 + 64*128)
    # * 4 = 327680 bytes), more than sm_90's 232448, so the build keeps cuBLAS for that GEMM alone.
    # That entry, as the H200 table of 2026-12-02 held it (the op check has since turned it back):
    from pffn import sample_inputs

    key = "float32:8x1024x64(65536,1,1024),8x64x256(256,2048,1)->8x1024x256"
    blocks = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 5, "num_warps": 8}
    table = empty_table(
        gemms={key: GemmEntry("triton", blocks, {"cublas": 0.0375, "triton": 0.0164})}
    )
    cap = capture(pffn, sample_inputs(64), dynamic=True, gpu=False, tuning=table)
    choices = [c for found in cap.gemm_timings.values() for c in found]
    too_big = [c for c in choices if "would need 327680 bytes of shared memory" in c["source"]]
    assert len(too_big) == 1 and too_big[0]["chosen"] == "cublas", choices
    assert not any(c["source"] == table.origin for c in choices)


def test_a_gpu_capture_finds_the_kernels_behind_inductors_wrapper_of_the_callable():
    """A GPU capture reads each kernel's autotuned configuration from the generated module's
    globals. Inductor wraps the module's `call` in a closure of its own (align_inputs_from_check_idxs),
    whose globals are torch's: read there, no kernel was ever found and tables held no kernel
    configuration. Compiled here on the CPU, the same wrapping applies."""
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner
    from torch._inductor.utils import align_inputs_from_check_idxs
    from torch.utils._ordered_set import OrderedSet

    from mirai.export.capture.inductor import wrapper_globals

    compiled = []

    def inner(gm, inputs, **kwargs):
        compiled.append(compile_fx_inner(gm, inputs, **kwargs))
        return compiled[-1]

    def backend(gm, example_inputs):
        return compile_fx(gm, example_inputs, inner_compile=inner)

    torch._dynamo.reset()
    with torch._inductor.config.patch(force_disable_caches=True):  # a cache hit skips `inner`
        torch.compile(lambda x: (x * 2.0).sin(), backend=backend)(torch.randn(8))
    module = wrapper_globals(compiled[0].current_callable)
    assert module["__name__"] == compiled[0].current_callable.__module__
    wrapped = align_inputs_from_check_idxs(compiled[0].current_callable, [0], OrderedSet())
    assert wrapped.__globals__["__name__"] == "torch._inductor.utils"  # the closure's own
    assert wrapper_globals(wrapped) is module
    assert wrapper_globals(len) == {}
