"""Request and response schemas of the HTTP API, one class per direction (guide §2).

Unknown request fields are ignored, never an error. `null` for an optional string means "not given".
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# Pipeline fields of /generate_ir in the guide's fixed order, with the tool alias each one drives.
PIPELINE_FIELDS: dict[str, str] = {
    "torch_mlir_opt": "torch-mlir-opt",
    "mlir_opt": "mlir-opt",
    "mlir_translate": "mlir-translate",
    "llvm_opt": "opt",
    "llc": "llc",
    "triton_opt": "triton-opt",
    "triton_llvm_opt": "triton-llvm-opt",
    "user_tool": "user-tool",
}

LANGUAGES = ("pytorch", "triton", "raw_ir")


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class GenerateRequest(_Request):
    """POST /generate_ir (and POST /jobs): what to compile and which IR to return."""

    code: str = Field(description="user code (PyTorch / Triton) or raw textual IR")
    ir_type: str = Field(description="the IR to return; GET /ir_types lists them")
    selected_language: str = Field("pytorch", description="pytorch | triton | raw_ir")
    torch_mlir_opt: str = ""
    mlir_opt: str = ""
    mlir_translate: str = ""
    llvm_opt: str = ""
    llc: str = ""
    triton_opt: str = ""
    triton_llvm_opt: str = ""
    user_tool: str = ""
    dump_after_each_opt: bool = False
    target: str | None = Field(
        None,
        description="the GPU target of whichever IR type has one, in any spelling of "
        "mirai.gpu.targets ('sm_90', 'cuda:90', '9.0', 'hip:gfx942'); triton_target and "
        "cuda_target are accepted as aliases, and win where given",
    )
    triton_target: str | None = Field(
        None,
        description="GPU target of Triton compilation, 'cuda:<cc>' or 'hip:<arch>' "
        "(default cuda:90; hip:gfx942 for triton_amdgpu)",
    )
    cuda_target: str | None = Field(
        None, description="CUDA target of inductor_output_code and mirai_tf_op (default sm_90)"
    )

    @field_validator("selected_language", mode="before")
    @classmethod
    def _default_language(cls, value):
        return "pytorch" if value in (None, "") else value

    @field_validator(*PIPELINE_FIELDS, mode="before")
    @classmethod
    def _none_is_empty(cls, value):
        return "" if value is None else value

    @field_validator("dump_after_each_opt", mode="before")
    @classmethod
    def _none_is_false(cls, value):
        return False if value is None else value

    @model_validator(mode="after")
    def _target_fills_the_aliases(self):
        """`target` is what triton_target and cuda_target default to; the IR type's generator
        checks that the target fits it (a HIP target for a CUDA-only IR type is an error there)."""
        if self.target:
            self.triton_target = self.triton_target or self.target
            self.cuda_target = self.cuda_target or self.target
        return self

    def cache_key(self) -> str:
        """Hash of the whole (normalised) request: the key of the result cache."""
        blob = json.dumps(self.model_dump(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


class FreeCacheRequest(_Request):
    """POST /free_ir_cache: the code string sent earlier."""

    code: str


class OkResponse(BaseModel):
    status: Literal["ok"] = "ok"
    output: str


class ErrorResponse(BaseModel):
    status: Literal["error"] = "error"
    message: str
    detail: str = ""


class StatusOk(BaseModel):
    status: Literal["ok"] = "ok"


class JobCreated(BaseModel):
    status: Literal["ok"] = "ok"
    job_id: str


class JobStatus(BaseModel):
    """GET /status/<job_id>: `state` is queued | running | done | failed | cancelled; `result` is the
    /generate_ir response once the job has finished (done: status ok, failed: status error)."""

    status: Literal["ok"] = "ok"
    job_id: str
    state: Literal["queued", "running", "done", "failed", "cancelled"]
    ir_type: str
    created_at: float
    finished_at: float | None = None
    result: dict | None = None


class TargetChoiceInfo(BaseModel):
    """The GPU target an IR type takes: `target` (or the alias `field`) names one of the server's
    `targets` whose backend is in `backends`; without it the IR type compiles for `default`."""

    field: Literal["triton_target", "cuda_target"]
    default: str
    backends: list[str]


class IRTypeInfo(BaseModel):
    name: str
    family: str = Field(description="the guide's group: pytorch | triton | raw")
    description: str
    label: str = Field(description="a short name for a menu")
    syntax: Literal["mlir", "llvm", "ptx", "asm", "python", "cpp", "text"] = Field(
        description="how the text is highlighted"
    )
    languages: list[str] = Field(description="the selected_language values this IR type serves")
    default_for: list[str] = Field(
        description="the languages for which a client shows this IR type first"
    )
    target: TargetChoiceInfo | None = Field(
        description="the GPU target this IR type takes, or null when it takes none"
    )


class TargetInfo(BaseModel):
    """A registered GPU target (mirai.gpu.targets). `target` takes its name; `triton_target` and
    `cuda_target` are its value in those alias fields (null: the field does not take it)."""

    name: str
    backend: str
    triton_target: str
    cuda_target: str | None
    device: str


class ToolInfo(BaseModel):
    alias: str
    field: str
    command: list[str] | None
    note: str


class Capabilities(BaseModel):
    """GET /ir_types: the IR types and tools this server offers."""

    status: Literal["ok"] = "ok"
    ir_types: list[IRTypeInfo]
    tools: list[ToolInfo]
    languages: list[str]
    pipeline_order: list[str]
    targets: list[TargetInfo]
