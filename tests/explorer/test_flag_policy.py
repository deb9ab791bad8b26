"""The tool flag policy (mirai.explorer.flagpolicy): unit tests of what it refuses and lets through
per tool, a check against the installed tools' own help, and requests to a live server showing that
refused flags write no file, load no library, leak no file and run nothing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from explorer_samples import GUIDE_MODEL, LLVM_DIALECT, LLVM_IR

from mirai.explorer.errors import ExplorerError
from mirai.explorer.flagpolicy import LLVM
from mirai.explorer.pipeline import Stage, check_stages, stages_of
from mirai.explorer.tools import TOOLS

LLVM_TOOLS = ("mlir-opt", "mlir-translate", "opt", "llc", "torch-mlir-opt")
ALL_TOOLS = (*LLVM_TOOLS, "triton-opt", "triton-llvm-opt", "user-tool")

TTIR = """
module {
  tt.func public @k(%p: !tt.ptr<f32>) {
    %c = arith.constant 1.0 : f32
    tt.store %p, %c : !tt.ptr<f32>
    tt.return
  }
}
""".lstrip()


CODES = {"mlir": LLVM_DIALECT, "llvm-ir": LLVM_IR, "ttir": TTIR, "text": "x\n"}


def refused(alias: str, flags: str) -> str:
    """The error detail for flags the policy must refuse (user-tool flags get `cat` in front)."""
    if alias == "user-tool":
        flags = f"cat {flags}"
    with pytest.raises(ExplorerError) as caught:
        TOOLS[alias].check_flags(flags, ["cat"])
    assert caught.value.message == f"Invalid flags for {alias}"
    return caught.value.detail


def accepted(alias: str, flags: str) -> None:
    if alias == "user-tool":
        flags = f"cat {flags}"
    TOOLS[alias].check_flags(flags, ["cat"])


# --- unit tests: every form, every tool -------------------------------------------------------

OUTPUT_FORMS = ["-o /tmp/x", "-o=/tmp/x", "--o=/tmp/x", "-o x", "-o=x", "--o x", "-ox", "-o/tmp/x"]
OUTPUT_FORMS += ["--output=x", "--output x", "-output-file=x", "--output-file=x", "--out=x"]


@pytest.mark.parametrize("alias", ALL_TOOLS)
@pytest.mark.parametrize("flags", OUTPUT_FORMS)
def test_output_files_are_refused(alias, flags):
    detail = refused(alias, f"--canonicalize {flags}")
    first = flags.split()[0]
    assert detail.startswith(f"{first}: ") and "output file" in detail.splitlines()[0]
    assert "--canonicalize" not in detail.splitlines()[0]


PLUGIN_FORMS = ["--load=/p.so", "-load=/p.so", "-load p.so", "--load p.so", "--load=p.so"]
PLUGIN_FORMS += ["--load-pass-plugin=p.so", "-load-pass-plugin p.so", "--load-dialect-plugin=p.so"]
PLUGIN_FORMS += ["-pass-plugin=p.so", "--pass-plugin p.so", "--x86-lvi-load-opt-plugin=p.so"]


@pytest.mark.parametrize("alias", ALL_TOOLS)
@pytest.mark.parametrize("flags", PLUGIN_FORMS)
def test_plugins_are_refused(alias, flags):
    detail = refused(alias, flags)
    assert detail.startswith(flags.split()[0] + ": loads a shared library")


@pytest.mark.parametrize("alias", ALL_TOOLS)
@pytest.mark.parametrize(
    "flags, flag, why",
    [
        ("/etc/passwd", "/etc/passwd", "not a flag"),
        ("-O2 input.mlir", "input.mlir", "not a flag"),
        ("-mtriple nvptx64", "nvptx64", "not a flag"),
        ("@/tmp/args", "@/tmp/args", "a response file"),
        ("@args.txt", "@args.txt", "a response file"),
        ("-- -x", "--", "ends the options"),
        ("--foo=/etc/passwd", "--foo=/etc/passwd", "contains '/'"),
        ("--foo=..", "--foo=..", "the value '..'"),
        ("-no/tmp/x", "-no/tmp/x", "contains '/'"),
        ("'--foo=a\0b'", "--foo=a\0b", "NUL"),
    ],
)
def test_files_response_files_and_positionals_are_refused(alias, flags, flag, why):
    detail = refused(alias, flags)
    line = next(line for line in detail.splitlines() if line.startswith(f"{flag}: "))
    assert why in line


FILE_OPTIONS = {
    "mlir-opt": [
        "--mlir-print-ir-tree-dir=tree",
        "--mlir-pass-pipeline-crash-reproducer=r.mlir",
        "--mlir-generate-reproducer=r.mlir",
        "--log-actions-to=log",
        "--profile-actions-to=prof",
        "--remarks-output-file=rem.yaml",
        "--irdl-file=d.irdl",
        "--info-output-file=info",
        "--crash-diagnostics-dir=..",
        "--run-reproducer",
        "--exec-on-ir-change=sh",
        "--print-changed-diff-path=sh",
        "--gpu-module-to-binary=toolkit=cuda",
        "'--gpu-module-to-binary=format=bin l=lib.bc'",
        "--nvvm-attach-target=ptxas-cmd-options=-v",
        "--pass-pipeline=builtin.module(gpu-module-to-binary{opts=-v})",
        "-p=builtin.module(snapshot-op-locations{filename=x.mlir})",
        "--transform-preload-library=transform-library-paths=lib.mlir",
    ],
    "mlir-translate": [
        "--spirv-save-validation-files-with-prefix=v",
        "--info-output-file=info",
        "--dot-cfg-dir=cfg",
    ],
    "opt": [
        "-info-output-file=info",
        "-time-trace -time-trace-file=t.json",
        "-pass-remarks-output=r.yaml",
        "-thin-link-bitcode-file=t.bc",
        "-debugify-export=d.csv",
        "-sample-profile-file=p.prof",
        "-pgo-test-profile-file=p.profdata",
        "-rewrite-map-file=m.map",
        "-summary-file=s.bc",
        "-cfg-dot-filename-prefix=cfg",
        "-passes=memprof-use<profile-filename=p.memprof>",
        "-passes=function(view-cfg)",
        "-p=view-dom",
        "-view-block-freq-propagation-dags=graph",
        "-pgo-view-counts=graph",
    ],
    "llc": [
        "-I=include",
        "-I include",
        "-Iinclude",
        "-I/usr/include",
        "-split-dwarf-output=x.dwo",
        "-time-trace-file=t.json",
        "-pass-remarks-output=r.yaml",
        "-save-stats=obj -o x.o",
    ],
    "torch-mlir-opt": [
        "--mlir-print-ir-tree-dir=tree",
        "--remarks-output-file=rem.yaml",
        "--log-actions-to=log",
        "'--torch-backend-to-linalg-on-tensors-backend-pipeline=extra-library=lib.mlir'",
    ],
}


@pytest.mark.parametrize(
    "alias, flags",
    [(alias, flags) for alias, all_flags in FILE_OPTIONS.items() for flags in all_flags],
)
def test_options_that_touch_files_are_refused(alias, flags):
    detail = refused(alias, flags)
    assert re.search(r"write|read|runs|viewer|shared library|downstream|output", detail), detail


LEGITIMATE = {
    "mlir-opt": [
        "--convert-linalg-to-loops",
        "--convert-scf-to-cf --reconcile-unrealized-casts",
        "--linalg-generalize-named-ops",
        "--pass-pipeline=builtin.module(func.func(convert-linalg-to-loops),canonicalize)",
        "-p=builtin.module(cse)",
        "'--sparsifier=enable-runtime-library=false'",
        "--canonicalize --mlir-print-ir-after-all --mlir-print-ir-module-scope",
        "--mlir-timing --mlir-pass-statistics --dump-pass-pipeline",
        "--split-input-file '--output-split-marker=// -----'",
        "--view-op-graph",
        "--allow-unregistered-dialect --mlir-print-debuginfo -",
    ],
    "mlir-translate": ["--mlir-to-llvmir", "--mlir-to-llvmir --mlir-print-local-scope"],
    "opt": [
        "-O2",
        "-passes=instcombine",
        "'-passes=function(instcombine,simplifycfg),loop-unroll<full-unroll-max=8>'",
        "-p=dot-cfg",
        "-S -stats -stats-json -print-after-all",
        "-opt-bisect-limit=3 -debug-pass-manager",
        "-mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx87",
    ],
    "llc": [
        "-mtriple=nvptx64 -mcpu=sm_90",
        "-mtriple=nvptx64-nvidia-cuda -mcpu=sm_80",
        "-mtriple=amdgcn-amd-amdhsa -mcpu=gfx942 -O3",
        "-O2 --x86-asm-syntax=intel -filetype=asm",
        "-save-stats",
    ],
    "torch-mlir-opt": [
        "--torch-backend-to-linalg-on-tensors-backend-pipeline",
        "--canonicalize --cse",
    ],
    "triton-opt": [
        "--tritongpu-coalesce",
        "'--convert-triton-to-tritongpu=target=cuda:80 num-warps=8'",
        "--tritongpu-pipeline={num-stages=2}",
        "--list-passes",
    ],
    "triton-llvm-opt": ["-O3 --emit=asm", "-mtriple=amdgcn-amd-amdhsa -mcpu=gfx942", "-mcpu=sm_80"],
    "user-tool": ["-n", "-A -s", ""],
}


@pytest.mark.parametrize(
    "alias, flags",
    [(alias, flags) for alias, all_flags in LEGITIMATE.items() for flags in all_flags],
)
def test_legitimate_flags_pass(alias, flags):
    accepted(alias, flags)


def test_every_refused_flag_of_a_stage_is_named():
    detail = refused("mlir-opt", "--cse -o out.mlir --load-pass-plugin=x.so in.mlir")
    lines = detail.splitlines()
    assert [line.split(": ")[0] for line in lines[:4]] == [
        "-o",
        "out.mlir",
        "--load-pass-plugin=x.so",
        "in.mlir",
    ]
    assert "(in the mlir-opt flags: --cse -o out.mlir --load-pass-plugin=x.so in.mlir)" in detail


def test_every_stage_of_a_chain_is_checked():
    stages = stages_of({"mlir_opt": "--cse && --canonicalize", "llc": "-O2 && -o /tmp/x"})
    assert stages[-1] == Stage("llc", "-o /tmp/x")
    with pytest.raises(ExplorerError, match="Invalid flags for llc") as caught:
        check_stages(stages)
    assert caught.value.detail.startswith("-o: ")
    check_stages(stages[:-1])


def test_user_tool_executable_is_checked_first():
    with pytest.raises(ExplorerError, match="executable 'ls' is not allowed"):
        check_stages([Stage("user-tool", "ls /")], ["cat"])
    with pytest.raises(ExplorerError, match="Invalid flags for user-tool"):
        check_stages([Stage("user-tool", "cat /etc/passwd")], ["cat"])
    with pytest.raises(ExplorerError, match="Invalid flags for user-tool"):
        check_stages([Stage("user-tool", "cat -- /etc/passwd")], ["cat"])


def test_unparsable_flags_keep_their_message():
    with pytest.raises(ExplorerError, match="cannot parse tool flags"):
        check_stages([Stage("llc", "'open")])


# --- the deny list against the installed tools' own help --------------------------------------

FILE_TYPED = re.compile(
    r"^  --?([A-Za-z0-9][^\s=<]*)(?:=| )<(filename|directory|path|pluginfilename|Directory path|"
    r"file name[^>]*)>",
    re.M,
)


@pytest.mark.tools
@pytest.mark.parametrize("alias", LLVM_TOOLS)
def test_every_file_typed_option_in_the_help_is_refused(alias):
    """Fails when the installed tool (a new LLVM) has a file, directory, path or plugin option
    that the policy lets through: add it to mirai.explorer.flagpolicy.LLVM_DENIED."""
    command = TOOLS[alias].resolve()
    help_text = subprocess.run(
        [*command, "--help-hidden"], capture_output=True, text=True, timeout=60
    ).stdout
    assert "--help-hidden" in help_text
    names = {match.group(1) for match in FILE_TYPED.finditer(help_text)}
    names |= set(re.findall(r"^  --?([\w-]*plugin[\w-]*)", help_text, re.M))
    assert "o" in names and len(names) > 5, names
    let_through = sorted(name for name in names if not LLVM.refusals([f"--{name}=x"]))
    assert let_through == []


# --- end to end, against a live server --------------------------------------------------------


def assert_refused(result: dict, tool: str) -> str:
    assert set(result) == {"status", "message", "detail"}, result
    assert result["status"] == "error" and result["message"] == f"Invalid flags for {tool}", result
    return result["detail"]


def raw(server, code: str, **fields) -> dict:
    """A raw_ir request; `code` is IR text or a key of CODES."""
    code = CODES.get(code, code)
    return server.generate(code=code, selected_language="raw_ir", ir_type="raw_ir", **fields)


@pytest.fixture
def scratch() -> Path:
    """A directory under /tmp with a name no earlier run used."""
    path = Path("/tmp") / f"mirai-flag-policy-{uuid.uuid4().hex}"
    path.mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.tools
@pytest.mark.parametrize(
    "field, flags, code, tool",
    [
        ("mlir_opt", "--canonicalize -o {out}", "mlir", "mlir-opt"),
        ("mlir_opt", "-o={out}", "mlir", "mlir-opt"),
        ("mlir_translate", "--mlir-to-llvmir -o {out}", "mlir", "mlir-translate"),
        ("llvm_opt", "-O2 -o {out}", "llvm-ir", "opt"),
        ("llc", "-mtriple=nvptx64 -mcpu=sm_90 -o={out}", "llvm-ir", "llc"),
        ("triton_opt", "--cse -o{out}", "ttir", "triton-opt"),
        ("triton_llvm_opt", "-mcpu=sm_80 -o {out}", "llvm-ir", "triton-llvm-opt"),
    ],
)
def test_output_redirection_writes_no_file(server, scratch, field, flags, code, tool):
    out = scratch / "out.txt"
    detail = assert_refused(raw(server, code=code, **{field: flags.format(out=out)}), tool)
    assert detail.startswith(("-o", "-o=")) and "output file" in detail
    assert not out.exists()
    assert list(scratch.iterdir()) == []


@pytest.fixture(scope="module")
def marker_library(tmp_path_factory):
    """A shared library whose constructor writes a marker file: (library, marker path)."""
    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    work = tmp_path_factory.mktemp("plugin")
    marker = work / "constructor-ran"
    source = work / "marker.cc"
    source.write_text(
        "#include <cstdio>\n"
        "__attribute__((constructor)) static void mark() {\n"
        f'  if (FILE *f = std::fopen("{marker}", "w")) {{ std::fputs("ran", f); std::fclose(f); }}\n'
        "}\n"
    )
    library = work / "libmarker.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-o", library, source], check=True, timeout=120)
    return library, marker


@pytest.mark.tools
def test_the_marker_library_does_mark_when_a_tool_loads_it(marker_library):
    """Control: loaded by the tool directly, outside the explorer, the constructor runs."""
    library, marker = marker_library
    opt = TOOLS["opt"].resolve()
    subprocess.run([*opt, "-S", f"--load={library}"], input=LLVM_IR, capture_output=True, text=True)
    assert marker.read_text() == "ran"
    marker.unlink()


@pytest.mark.tools
@pytest.mark.parametrize(
    "field, flags, code, tool",
    [
        ("llvm_opt", "--load={lib}", "llvm-ir", "opt"),
        ("llvm_opt", "-O2 && -load-pass-plugin={lib}", "llvm-ir", "opt"),
        ("llc", "-load {lib}", "llvm-ir", "llc"),
        ("mlir_opt", "--load-pass-plugin={lib} --canonicalize", "mlir", "mlir-opt"),
        ("mlir_opt", "--load-dialect-plugin={lib}", "mlir", "mlir-opt"),
    ],
)
def test_plugins_are_not_loaded(server, marker_library, field, flags, code, tool):
    library, marker = marker_library
    detail = assert_refused(raw(server, code=code, **{field: flags.format(lib=library)}), tool)
    assert "loads a shared library" in detail
    assert not marker.exists()


def _passwd_line() -> str:
    return Path("/etc/passwd").read_text().splitlines()[0]


@pytest.mark.tools
def test_passwd_would_leak_through_a_positional():
    """Control: run directly, the tools echo the file's first line in their error."""
    line = _passwd_line()
    opt = TOOLS["opt"].resolve()
    leaked = subprocess.run([*opt, "-S", "/etc/passwd"], capture_output=True, text=True)
    assert line in leaked.stderr


@pytest.mark.tools
@pytest.mark.parametrize(
    "field, flags, code, tool",
    [
        ("llvm_opt", "/etc/passwd", "llvm-ir", "opt"),
        ("mlir_opt", "--canonicalize /etc/passwd", "mlir", "mlir-opt"),
        ("mlir_translate", "--mlir-to-llvmir -- /etc/passwd", "mlir", "mlir-translate"),
        ("llc", "-mtriple=nvptx64 ../../../../../../etc/passwd", "llvm-ir", "llc"),
        ("user_tool", "cat /etc/passwd", "text", "user-tool"),
        ("user_tool", "cat -n -- /etc/passwd", "text", "user-tool"),
    ],
)
def test_positional_files_do_not_leak(server, field, flags, code, tool):
    result = raw(server, code=code, **{field: flags})
    detail = assert_refused(result, tool)
    assert "not a flag" in detail or "ends the options" in detail
    assert _passwd_line() not in str(result) and "root:x:0" not in str(result)


@pytest.mark.tools
def test_response_files_are_refused(server, scratch):
    out = scratch / "out.s"
    args = scratch / "args.txt"
    args.write_text(f"-o {out}\n")
    for field, tool in (("llc", "llc"), ("llvm_opt", "opt"), ("mlir_opt", "mlir-opt")):
        result = raw(server, code=LLVM_IR, **{field: f"@{args}"})
        assert assert_refused(result, tool).startswith(f"@{args}: a response file")
    assert sorted(scratch.iterdir()) == [args]


@pytest.mark.tools
def test_nothing_runs_when_a_later_stage_is_refused(server, scratch):
    """The user's code (the generator) and the earlier stages do not run: the check comes first."""
    marker = scratch / "user-code-ran"
    code = f"open({str(marker)!r}, 'w').write('ran')\n" + GUIDE_MODEL + "\n# flag policy\n"
    result = server.generate(
        code=code,
        ir_type="llvm_ir",
        mlir_opt="--canonicalize",
        llvm_opt="-O2 && -O3",
        llc="-mtriple=nvptx64 && --time-trace-file=trace.json",
    )
    assert assert_refused(result, "llc").startswith("--time-trace-file=trace.json: writes a file")
    assert not marker.exists()


@pytest.mark.tools
def test_refused_jobs_fail_the_same_way(server):
    created = server.post(
        "/jobs",
        {"code": LLVM_IR, "ir_type": "raw_ir", "selected_language": "raw_ir", "llc": "-o /tmp/x"},
    )
    job_id = created.json()["job_id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = server.get(f"/status/{job_id}").json()
        if status["state"] not in ("queued", "running"):
            break
        time.sleep(0.1)
    assert status["state"] == "failed"
    assert assert_refused(status["result"], "llc").startswith("-o: ")


@pytest.mark.tools
def test_the_next_legitimate_request_answers(server, scratch):
    out = scratch / "out.ll"
    assert_refused(raw(server, code=LLVM_IR, llvm_opt=f"-o {out}"), "opt")
    output = raw(server, code=LLVM_IR, llvm_opt="-passes=instcombine", llc="-mtriple=nvptx64")
    assert output["status"] == "ok", output
    assert ".visible .func" in output["output"] and "square_plus" in output["output"]
    again = raw(
        server, code=LLVM_DIALECT, mlir_opt="--canonicalize", mlir_translate="--mlir-to-llvmir"
    )
    assert again["status"] == "ok" and "define i32 @add" in again["output"]
    assert not out.exists()
