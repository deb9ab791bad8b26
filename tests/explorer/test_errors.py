"""Every error a client can cause comes back in the guide's shape {status: error, message, detail}."""

from __future__ import annotations

import httpx
from explorer_samples import GUIDE_MODEL


def assert_error(result: dict) -> None:
    assert set(result) == {"status", "message", "detail"}, result
    assert result["status"] == "error" and result["message"]


def test_unsupported_ir_type_is_exact(server):
    result = server.generate(code=GUIDE_MODEL, ir_type="no_such_ir")
    assert result == {"status": "error", "message": "IR type not supported", "detail": ""}


def test_malformed_json(server):
    response = server.post("/generate_ir", b'{"code": "x", "ir_type": ')
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    result = response.json()
    assert_error(result)
    assert "malformed JSON" in result["message"]


def test_missing_required_field(server):
    result = server.post("/generate_ir", {"ir_type": "torch_mlir"}).json()
    assert_error(result)
    assert "code" in result["message"]


def test_wrong_field_type(server):
    result = server.post("/generate_ir", {"code": 3, "ir_type": "torch_mlir"}).json()
    assert_error(result)


def test_unknown_fields_are_ignored(server):
    output = server.ok(code=GUIDE_MODEL, ir_type="torch_mlir", colour="blue", extra={"a": 1})
    assert "torch.aten.relu" in output


def test_null_optional_fields_are_defaults(server):
    output = server.ok(
        code=GUIDE_MODEL, ir_type="torch_mlir", mlir_opt=None, selected_language=None
    )
    assert "torch.aten.relu" in output


def test_syntax_error(server):
    result = server.generate(code="def broken(:\n  pass", ir_type="torch_mlir")
    assert_error(result)
    assert result["message"].startswith("SyntaxError in user code")
    assert "line 1" in result["message"]


def test_exception_has_traceback(server):
    code = "import torch\ndef f():\n    raise ValueError('bad shape')\nf()\n"
    result = server.generate(code=code, ir_type="torch_mlir")
    assert_error(result)
    assert result["message"] == "error in user code: ValueError: bad shape"
    assert "Traceback" in result["detail"] and "line 3, in f" in result["detail"]


def test_no_model(server):
    result = server.generate(code="import torch\nx = 1\n", ir_type="torch_mlir")
    assert_error(result)
    assert result["message"] == "no model found in the code"
    assert "__explore__" in result["detail"]


def test_model_that_fails_to_export(server):
    code = GUIDE_MODEL + "\nexample_input = torch.randn(3, 7)\n"  # wrong shape for Linear(4, 4)
    result = server.generate(code=code, ir_type="torch_mlir")
    assert_error(result)
    assert result["message"].startswith("could not generate torch_mlir: RuntimeError: ")
    assert "Traceback" in result["detail"]


def test_bad_ir_names_the_tool(server):
    result = server.generate(
        code="this is not MLIR", ir_type="raw_ir", selected_language="raw_ir", mlir_opt="--cse"
    )
    assert_error(result)
    assert result["message"] == "mlir-opt --cse failed (exit code 1)"
    assert "error:" in result["detail"]


def test_bad_language(server):
    result = server.generate(code="x", ir_type="raw_ir", selected_language="cobol")
    assert_error(result)
    assert "cobol" in result["message"]


def test_bad_flags_quoting(server):
    result = server.generate(code="x", ir_type="raw_ir", selected_language="raw_ir", llc="'open")
    assert_error(result)
    assert result["message"] == "cannot parse tool flags"


def test_errors_are_not_cached(server):
    code = "raise RuntimeError('once')"
    first = server.post("/generate_ir", {"code": code, "ir_type": "torch_mlir"})
    second = server.post("/generate_ir", {"code": code, "ir_type": "torch_mlir"})
    assert first.json()["status"] == second.json()["status"] == "error"
    assert second.headers["X-Mirai-Cache"] == "miss"


def test_json_body_without_json_content_type(server):
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        response = httpx.post(
            server.url + "/generate_ir",
            content=b'{"code": "module {}", "ir_type": "raw_ir", "selected_language": "raw_ir"}',
            headers={"Content-Type": content_type},
        )
        assert response.json() == {"status": "ok", "output": "module {}"}


def test_empty_body(server):
    result = server.post("/generate_ir", b"").json()
    assert_error(result)
