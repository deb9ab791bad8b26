"""One /generate_ir request, start to finish, as a request process runs it: generator for the
ir_type, then the optional pipeline, in the request's own folder (made and removed by
mirai.explorer.isolate). Always returns the guide's response shape.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from mirai.explorer.errors import ExplorerError, error_response, ok_response
from mirai.explorer.irtypes import Context, lookup
from mirai.explorer.irtypes.registry import join_sections
from mirai.explorer.pipeline import apply_pipeline, check_stages, stages_of


def execute(
    request: dict,
    *,
    workdir: Path,
    tool_timeout_s: float = 60.0,
    allowed_user_tools: list[str] | None = None,
    triton_cache_dir: str | None = None,
) -> dict:
    """{status: ok, output} or {status: error, message, detail} for one request (a dict of fields)."""
    try:
        ir_type = lookup(request.get("ir_type", ""))
        ctx = Context(
            request=request,
            workdir=Path(workdir),
            tool_timeout_s=tool_timeout_s,
            triton_cache_dir=Path(triton_cache_dir) if triton_cache_dir else None,
        )
        stages = stages_of(request)
        check_stages(stages, allowed_user_tools)  # before the user's code or any tool runs
        sections = [
            (
                label,
                apply_pipeline(
                    ir,
                    stages,
                    dump_each=bool(request.get("dump_after_each_opt")),
                    timeout_s=tool_timeout_s,
                    allowed_user_tools=allowed_user_tools or [],
                ),
            )
            for label, ir in ir_type.generate(ctx)
        ]
        return ok_response(join_sections(sections, ir_type.comment))
    except ExplorerError as err:
        return err.as_response()
    except MemoryError:
        return error_response(
            "memory limit exceeded", "the request needed more memory than a worker may use"
        )
    except Exception as err:  # raised while compiling the user's model or kernels
        detail = "".join(traceback.format_exception(type(err), err, err.__traceback__))
        summary = str(err).strip().splitlines()[0] if str(err).strip() else ""
        message = f"could not generate {request.get('ir_type')}: {type(err).__name__}: {summary}"
        return error_response(message, detail)


def runs_nothing(request: dict) -> bool:
    """Whether the request runs no code and no tool: raw IR in, the same IR out. Such a request needs
    no process of its own (the worker answers it directly)."""
    language = request.get("selected_language") or "pytorch"
    return request.get("ir_type") == "raw_ir" and language == "raw_ir" and not stages_of(request)
