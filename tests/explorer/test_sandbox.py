"""The sandbox as an operator meets it: `mirai serve` refuses to start without bubblewrap unless told
--no-sandbox, says which in its log and /version, and --allow-user-tools runs a tool at any path, still
inside the sandbox. (What the sandbox holds against hostile code is tests/explorer/test_attacks.py.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import httpx
import pytest

from explorer_server import ROOT, start_server


def _serve(tmp_path, *args: str, path: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "mirai.explorer", "--port", "1", "--workers", "1"]
    command += ["--cache-dir", str(tmp_path / "cache"), *args]
    env = {**os.environ, "PATH": path}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _path_without_bwrap(tmp_path) -> str:
    """$PATH with every folder that holds `bwrap` left out (the rest of the tools stay)."""
    kept = [d for d in os.environ["PATH"].split(os.pathsep) if not os.path.exists(f"{d}/bwrap")]
    assert shutil.which("bwrap") is not None, "bubblewrap must be installed (make installs it)"
    return os.pathsep.join(kept)


def test_refuses_to_start_without_bubblewrap(tmp_path):
    result = _serve(tmp_path, path=_path_without_bwrap(tmp_path))
    assert result.returncode == 2
    assert "bubblewrap (bwrap) is not installed" in result.stderr
    assert "--no-sandbox" in result.stderr


def test_version_and_log_say_the_sandbox_is_on(tmp_path):
    server = start_server(tmp_path, "--workers", "1")
    try:
        version = server.get("/version").json()
        assert version.startswith("mirai-explorer ") and "(sandbox bubblewrap " in version
        assert "every request runs in bubblewrap" in server.log.read_text()
    finally:
        server.proc.terminate()
        server.proc.wait(20)


@pytest.fixture(scope="module")
def unsandboxed(make_server):
    server = make_server("--workers", "1", "--no-sandbox", "--timeout", "5")
    server.wait_ready()
    return server


def test_no_sandbox_is_said_and_still_isolates_requests(unsandboxed):
    assert unsandboxed.get("/version").json().endswith("(sandbox off)")
    assert "WARNING: the sandbox is off" in unsandboxed.log.read_text()
    # Without bubblewrap, each request still runs in a fresh child of the warm worker.
    patch = "import torch\ntorch.relu = lambda x: x\nprint('patched')"
    assert unsandboxed.ok(code=patch, ir_type="raw_ir", selected_language="pytorch") == "patched\n"
    check = "import torch\nprint(torch.relu(torch.tensor([-1.0])).item())"
    assert unsandboxed.ok(code=check, ir_type="raw_ir", selected_language="pytorch") == "0.0\n"


def test_no_sandbox_request_folders_go_whatever_the_outcome(unsandboxed):
    scratch = unsandboxed.cache_dir / "scratch"
    for code in (
        "open('left-behind', 'w').write('x')\nprint('ok')",
        "open('left-behind', 'w').write('x')\nwhile True:\n    pass",
        "import os\nopen('left-behind', 'w').write('x')\nos.abort()",
    ):
        unsandboxed.generate(code=code, ir_type="raw_ir", selected_language="pytorch")
        # The worker answers first and tears the request down after: give it a moment.
        deadline = time.monotonic() + 30
        while list(scratch.rglob("left-behind")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert scratch.is_dir() and not list(scratch.rglob("left-behind"))


def test_allow_user_tools_runs_a_tool_at_any_path_in_the_sandbox(make_server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("user-tool")
    tool = folder / "upper.sh"
    tool.write_text(
        "#!/bin/sh\n# a tool at a temporary path (a folder only its owner may open)\ntr a-z A-Z\n"
    )
    tool.chmod(0o755)
    server = make_server("--workers", "1", "--allow-user-tools")
    server.wait_ready()
    output = server.ok(
        code="abc\n", ir_type="raw_ir", selected_language="raw_ir", user_tool=str(tool)
    )
    assert output.splitlines()[0] == "ABC"


def test_no_sandbox_answers_only_this_machines_loopback(unsandboxed):
    """Unconfined, the server must not run what any web page the user visits sends it: a page on
    another origin (its text/plain POST needs no preflight) and a DNS-rebinding page (which reaches
    127.0.0.1 under its own name) are refused; pages on the loopback work as before."""
    assert "loopback only (Host and Origin checked)" in unsandboxed.log.read_text()
    body = {"code": "print('ran')", "ir_type": "raw_ir", "selected_language": "pytorch"}
    refused = [
        {"Origin": "http://attacker.example"},
        {"Origin": "http://127.0.0.1.attacker.example"},
        {"Host": "rebound.attacker.example"},
        {"Host": "rebound.attacker.example", "Origin": "http://rebound.attacker.example"},
    ]
    for headers in refused:
        response = httpx.post(
            unsandboxed.url + "/generate_ir",
            content=json.dumps(body),
            headers={"Content-Type": "text/plain", **headers},
            timeout=60,
        )
        assert response.status_code == 403, (headers, response.text)
        answer = response.json()
        assert answer["status"] == "error" and "--no-sandbox" in answer["message"], answer
        assert "not this machine's loopback" in answer["detail"] or "not a page" in answer["detail"]
    port = unsandboxed.url.rsplit(":", 1)[1]
    for origin in ("http://localhost:5173", f"http://127.0.0.1:{port}", "http://[::1]:8080"):
        response = httpx.post(
            unsandboxed.url + "/generate_ir",
            json=body,
            headers={"Origin": origin},
            timeout=60,
        )
        assert response.json() == {"status": "ok", "output": "ran\n"}, origin
        assert response.headers["access-control-allow-origin"] == origin
    assert httpx.get(unsandboxed.url + "/version", headers={"Host": f"localhost:{port}"}).is_success
    # the server keeps serving after the refusals
    assert unsandboxed.ok(**body) == "ran\n"
