"""One op called on several threads at once, as TensorFlow may call Compute: the calls share the GEMM
plans of the runtime (mirai_runtime.h), and a GEMM with a bias epilogue takes a bias pointer per
call, so each call must run with its own. Run on the CPU stand-ins for the driver and cuBLASLt, whose
matmul reads the bias pointer from the description it is given."""

from __future__ import annotations

import json

import torch

import mirai

from tests.export.conftest import interpreted, only_variant

THREADS, CALLS, B, K, N = 8, 12, 6, 16, 8


@mirai.op(name="Affine")
def affine(x, w, b):
    return x @ w + b


# In the CPU driver's process: every thread calls the forward op's C interface with its own inputs,
# bias and output, and checks each result against torch. Its allocator (asked for the call's scratch
# memory after the GEMMs are planned, before they run) sleeps, so the other threads plan theirs in
# between: a description shared by the calls would then hold another thread's bias pointer.
SCRIPT = """
import ctypes, json, sys, threading, time
import torch
from mirai.export.hostdriver import driver
from mirai.export.launch import ALLOCATE, GeneratedOp

directory, threads, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
host = driver.get()
op = GeneratedOp(directory, "AffineFwd", host=True)
host.configure(op._cc)
errors, failures = [], []
start = threading.Barrier(threads)

def work(seed):
    g = torch.Generator().manual_seed(seed)
    x, w = torch.randn({B}, {K}, generator=g), torch.randn({K}, {N}, generator=g)
    b = torch.randn({N}, generator=g) * 100  # a wrong bias shows at once
    y, scratch = torch.empty({B}, {N}), torch.empty(1 << 16, dtype=torch.uint8)
    symbols = op.bind([x, w, b])
    ins = (ctypes.c_void_p * 3)(x.data_ptr(), w.data_ptr(), b.data_ptr())
    outs = (ctypes.c_void_p * 1)(y.data_ptr())
    err = ctypes.create_string_buffer(2048)

    def allocate(ctx, nbytes):
        time.sleep(0.002)
        return scratch.data_ptr()

    callback = ALLOCATE(allocate)
    start.wait()
    for _ in range(calls):
        y.fill_(float("nan"))
        if op._run(None, symbols, ins, outs, callback, None, err, len(err)):
            failures.append(err.value.decode())
        else:
            errors.append(float((y - (x @ w + b)).abs().max()))

workers = [threading.Thread(target=work, args=(seed,)) for seed in range(threads)]
for t in workers:
    t.start()
for t in workers:
    t.join()
print(json.dumps({{"errors": errors, "failures": failures, "gemms": host.gemms()}}))
""".format(B=B, K=K, N=N)


def test_concurrent_calls_each_run_with_their_own_bias(tmp_path):
    out = tmp_path / "affine"
    sample = [torch.randn(B, K), torch.randn(K, N), torch.randn(N)]
    mirai.build(affine, sample, output_dir=out, gemm="cublas", progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    forward = only_variant(manifest["ops"]["AffineFwd"])
    assert not forward["launches"] and [g["bias"] for g in forward["gemms"]] == ["vector"]
    seen = interpreted(SCRIPT, out, THREADS, CALLS)
    assert seen["failures"] == []
    assert len(seen["errors"]) == THREADS * CALLS == seen["gemms"]
    assert all(e < 1e-3 for e in seen["errors"]), seen["errors"]  # NaN fails too
