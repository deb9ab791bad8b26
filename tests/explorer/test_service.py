"""The service around the IR types: meta endpoints, CORS, the page, concurrency, caches, jobs."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from explorer_samples import ADD_KERNEL, GUIDE_MODEL, TWO_MODELS

GUIDE_IR_TYPES = [
    "torch_script_graph_ir",
    "torch_mlir",
    "tosa_mlir",
    "linalg_on_tensors_mlir",
    "stablehlo_mlir",
    "llvm_mlir",
    "llvm_ir",
    "nvptx",
    "amdgpu",
    "spirv",
    "triton_ir",
    "triton_gpu_ir",
    "triton_llvm_ir",
    "triton_nvptx",
    "triton_amdgpu",
    "raw_ir",
]


def test_version(server):
    response = server.get("/version")
    assert response.status_code == 200
    assert response.json().startswith("mirai-explorer ")


def test_ir_types_lists_everything(server):
    body = server.get("/ir_types").json()
    assert server.get("/capabilities").json() == body
    names = [t["name"] for t in body["ir_types"]]
    assert set(GUIDE_IR_TYPES) <= set(names)
    assert {"inductor_output_code", "mirai_tf_op"} <= set(names)
    tools = {t["alias"]: t for t in body["tools"]}
    assert list(tools) == [
        "torch-mlir-opt",
        "mlir-opt",
        "mlir-translate",
        "opt",
        "llc",
        "triton-opt",
        "triton-llvm-opt",
        "user-tool",
    ]
    for alias in ("torch-mlir-opt", "mlir-opt", "mlir-translate", "opt", "llc", "triton-opt"):
        assert tools[alias]["command"], f"{alias} is not installed"
    assert (
        body["pipeline_order"][0] == "torch_mlir_opt" and body["pipeline_order"][-1] == "user_tool"
    )


def test_ir_types_serve_what_a_client_shows(server):
    body = server.get("/ir_types").json()
    types = {t["name"]: t for t in body["ir_types"]}
    for t in types.values():
        assert t["label"] and t["syntax"] in ("mlir", "llvm", "ptx", "asm", "python", "cpp", "text")
        assert set(t["languages"]) <= set(body["languages"])
        assert set(t["default_for"]) <= set(t["languages"])
    assert types["torch_mlir"] == {
        "name": "torch_mlir",
        "family": "pytorch",
        "description": types["torch_mlir"]["description"],
        "label": "Torch MLIR",
        "syntax": "mlir",
        "languages": ["pytorch"],
        "default_for": ["pytorch"],
        "target": None,
    }
    assert types["llvm_ir"]["syntax"] == "llvm" and types["nvptx"]["syntax"] == "ptx"
    assert types["mirai_tf_op"]["syntax"] == "cpp"
    assert types["raw_ir"]["family"] == "raw" and types["raw_ir"]["target"] is None
    assert sorted(types["raw_ir"]["languages"]) == ["pytorch", "raw_ir", "triton"]
    # one default IR type per language
    defaults = {
        lang: [n for n, t in types.items() if lang in t["default_for"]]
        for lang in body["languages"]
    }
    assert defaults == {"pytorch": ["torch_mlir"], "triton": ["triton_ir"], "raw_ir": ["raw_ir"]}
    # which target field applies, its default, and the backends it takes
    assert types["triton_gpu_ir"]["target"] == {
        "field": "triton_target",
        "default": "sm_90",
        "backends": ["cuda", "hip"],
    }
    assert types["triton_nvptx"]["target"]["backends"] == ["cuda"]
    assert types["triton_amdgpu"]["target"] == {
        "field": "triton_target",
        "default": "gfx942",
        "backends": ["hip"],
    }
    for name in ("inductor_output_code", "mirai_tf_op"):
        assert types[name]["target"] == {
            "field": "cuda_target",
            "default": "sm_90",
            "backends": ["cuda"],
        }
    assert [
        t["name"] for t in types.values() if t["target"] is None and t["family"] == "triton"
    ] == []
    # every target with its value in each field that takes it
    targets = {t["name"]: t for t in body["targets"]}
    assert targets["sm_80"] == {
        "name": "sm_80",
        "backend": "cuda",
        "triton_target": "cuda:80",
        "cuda_target": "sm_80",
        "device": "NVIDIA A100-SXM4-80GB",
    }
    assert targets["gfx942"]["triton_target"] == "hip:gfx942"
    assert targets["gfx942"]["cuda_target"] is None
    for t in types.values():
        if t["target"]:
            assert targets[t["target"]["default"]]["backend"] in t["target"]["backends"]


def test_openapi_docs(server):
    paths = server.get("/openapi.json").json()["paths"]
    for path in ("/generate_ir", "/free_ir_cache", "/version", "/ir_types", "/jobs"):
        assert path in paths
    assert server.get("/docs").status_code == 200


def test_cors_is_open(server):
    response = server.get("/version", headers={"Origin": "http://example.com"})
    assert response.headers["access-control-allow-origin"] == "*"
    preflight = httpx.options(
        server.url + "/generate_ir",
        headers={
            "Origin": "http://example.com",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] in ("*", "http://example.com")


def test_page_is_served(server):
    response = server.get("/")
    assert response.status_code == 200
    assert "<html" in response.text.lower()


def test_eight_concurrent_requests(server):
    cases = [
        (
            GUIDE_MODEL.replace("randn(4, 4)", f"randn({n}, 4)"),
            "torch_mlir",
            f"!torch.vtensor<[{n},4],f32>",
        )
        for n in range(1, 4)
    ]
    cases += [
        (GUIDE_MODEL, "tosa_mlir", "tosa.matmul"),
        (GUIDE_MODEL, "nvptx", ".target sm_90"),
        (TWO_MODELS, "stablehlo_mlir", "stablehlo.tanh"),
        (
            ADD_KERNEL.replace("BLOCK=1024", "BLOCK=512"),
            "triton_nvptx",
            ".visible .entry add_kernel",
        ),
        (ADD_KERNEL.replace("4096", "8192"), "triton_gpu_ir", "#ttg.blocked"),
    ]
    assert len(cases) == 8

    def one(case):
        code, ir_type, needle = case
        return needle, server.generate(code=code, ir_type=ir_type)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, cases))
    for needle, result in results:
        assert result["status"] == "ok", result
        assert needle in result["output"]


def test_cache_hit_is_fast_and_identical(server):
    request = {"code": GUIDE_MODEL + "\n# cache test\n", "ir_type": "linalg_on_tensors_mlir"}
    first = server.post("/generate_ir", request)
    assert first.headers["X-Mirai-Cache"] == "miss"
    started = time.perf_counter()
    second = server.post("/generate_ir", request)
    elapsed = time.perf_counter() - started
    assert second.headers["X-Mirai-Cache"] == "hit"
    assert second.json() == first.json()
    assert elapsed < 0.5
    # Any field of the request is part of the key.
    third = server.post("/generate_ir", {**request, "mlir_opt": "--canonicalize"})
    assert third.headers["X-Mirai-Cache"] == "miss"


def test_free_ir_cache(server):
    code = ADD_KERNEL + "\n# free test\n"
    assert server.ok(code=code, ir_type="triton_ir")
    repeat = server.post("/generate_ir", {"code": code, "ir_type": "triton_ir"})
    assert repeat.headers["X-Mirai-Cache"] == "hit"
    # Triton's files lived in the request's own folder: nothing of them is left on the host.
    assert not (server.cache_dir / "triton").exists()
    response = server.post("/free_ir_cache", {"code": code})
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    again = server.post("/generate_ir", {"code": code, "ir_type": "triton_ir"})
    assert again.headers["X-Mirai-Cache"] == "miss" and again.json()["status"] == "ok"
    # Freeing code that was never sent is fine too.
    assert server.post("/free_ir_cache", {"code": "never sent"}).json() == {"status": "ok"}


def test_free_ir_cache_malformed(server):
    result = server.post("/free_ir_cache", b"{").json()
    assert result["status"] == "error"


def wait_job(server, job_id: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = server.get(f"/status/{job_id}").json()
        if status["state"] in ("done", "failed", "cancelled"):
            return status
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish")


def test_job_api(server):
    created = server.post("/jobs", {"code": GUIDE_MODEL + "\n# job\n", "ir_type": "tosa_mlir"})
    assert created.status_code == 200
    job_id = created.json()["job_id"]
    status = wait_job(server, job_id)
    assert status["state"] == "done"
    assert status["result"]["status"] == "ok" and "tosa.matmul" in status["result"]["output"]
    assert server.get(f"/jobs/{job_id}").json()["state"] == "done"


def test_failed_job(server):
    job_id = server.post("/jobs", {"code": "1/0", "ir_type": "torch_mlir"}).json()["job_id"]
    status = wait_job(server, job_id)
    assert status["state"] == "failed"
    assert status["result"]["message"] == "error in user code: ZeroDivisionError: division by zero"


def test_unknown_job(server):
    response = server.get("/status/nope")
    assert response.status_code == 404
    assert response.json()["status"] == "error"


def test_cancel_job(server):
    code = "import time\ntime.sleep(60)\n"
    job_id = server.post("/jobs", {"code": code, "ir_type": "torch_mlir"}).json()["job_id"]
    deadline = time.monotonic() + 30
    while server.get(f"/status/{job_id}").json()["state"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    cancelled = server.post(f"/jobs/{job_id}/cancel", {}).json()
    assert cancelled["state"] == "cancelled" and cancelled["result"] is None
    assert server.get(f"/status/{job_id}").json()["state"] == "cancelled"
    # The worker that ran it is replaced: the pool is whole again and still answers.
    server.wait_ready(workers=2)
    assert "torch.aten.relu" in server.ok(
        code=GUIDE_MODEL + "\n#after cancel\n", ir_type="torch_mlir"
    )


def test_cancel_with_delete(server):
    code = "import time\ntime.sleep(60)\n#delete\n"
    job_id = server.post("/jobs", {"code": code, "ir_type": "torch_mlir"}).json()["job_id"]
    deleted = httpx.delete(f"{server.url}/jobs/{job_id}").json()
    assert deleted["state"] == "cancelled"
    server.wait_ready(workers=2)
