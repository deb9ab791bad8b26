"""The IR-type registry, without a server: family modules declare their IR types as data, the registry
is built from them once and reports every wrong declaration together, and each entry carries what
GET /ir_types serves (label, highlighting, languages, GPU target)."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

from mirai.explorer.irtypes import FAMILY_MODULES, IR_TYPES, lookup
from mirai.explorer.irtypes.registry import (
    LANGUAGES,
    IRType,
    RegistryError,
    TargetChoice,
    build_registry,
)
from mirai.explorer.errors import ExplorerError
from mirai.gpu.targets import TARGETS


def _family(name: str, *ir_types: IRType) -> types.ModuleType:
    module = types.ModuleType(name)
    module.IR_TYPES = ir_types
    return module


def _type(name: str, **extra) -> IRType:
    fields = {"languages": ("pytorch",), **extra}
    return IRType(name, "pytorch", name.title(), "", lambda ctx: [], **fields)


RAW = _family("raw", IRType("raw_ir", "raw", "Raw", "", lambda ctx: [], languages=LANGUAGES))
DEFAULTS = _family(
    "defaults",
    _type("p", default_for=("pytorch",)),
    _type("t", languages=("triton",), default_for=("triton",)),
    _type("r", languages=("raw_ir",), default_for=("raw_ir",)),
)


def test_the_registry_is_built_from_declarations_in_order():
    registry = build_registry([DEFAULTS, RAW])
    assert list(registry) == ["p", "t", "r", "raw_ir"]
    assert registry["raw_ir"] is RAW.IR_TYPES[0]


def test_every_problem_is_reported_once_together():
    first = _family("first", _type("a"), _type(""))
    second = _family(
        "second",
        _type("a"),
        _type("b", syntax="cobol", target=TargetChoice("cuda_target", "gfx942", ("cuda",))),
    )
    with pytest.raises(RegistryError) as raised:
        build_registry([DEFAULTS, first, second, types.ModuleType("empty")])
    message = str(raised.value)
    assert message.startswith("IR type registration failed:")
    assert "first: an IR type without a name" in message
    assert "second: IR type 'a' is declared again (first in first)" in message
    assert message.count("'a' is declared again") == 1
    assert "second: b: syntax 'cobol'" in message
    assert "default target 'gfx942' is not a registered target of backend cuda" in message
    assert "empty declares no IR_TYPES tuple" in message


def test_each_language_has_one_default():
    with pytest.raises(RegistryError, match="language 'triton' needs one default IR type"):
        build_registry([_family("only", _type("p", languages=LANGUAGES, default_for=("pytorch",)))])


def test_the_real_registry():
    assert [t.name for t in IR_TYPES.values()][:2] == ["torch_script_graph_ir", "torch_mlir"]
    assert lookup("torch_mlir").label == "Torch MLIR"
    with pytest.raises(ExplorerError, match="IR type not supported"):
        lookup("no_such_type")
    assert {t.name for t in IR_TYPES.values() if t.default_for} == {
        "torch_mlir",
        "triton_ir",
        "raw_ir",
    }
    for ir_type in IR_TYPES.values():
        if ir_type.family == "triton":
            assert ir_type.target is not None and ir_type.target.field == "triton_target"
        if ir_type.target is not None:
            assert ir_type.target.default in TARGETS
    assert lookup("triton_nvptx").target.backends == ("cuda",)
    assert lookup("triton_amdgpu").target.default == "gfx942"
    assert lookup("mirai_tf_op").target.field == "cuda_target"
    assert lookup("raw_ir").target is None and set(lookup("raw_ir").languages) == set(LANGUAGES)
    assert lookup("inductor_output_code").syntax == "python"
    declared = [t for module in FAMILY_MODULES for t in module.IR_TYPES]
    assert list(IR_TYPES.values()) == declared


def test_listing_the_registry_imports_no_compiler():
    # The server imports the registry to list IR types; torch, torch_mlir and triton load only in
    # the workers that run generators.
    code = (
        "import sys, mirai.explorer.irtypes, mirai.explorer.app\n"
        "print(sorted(m for m in ('torch', 'torch_mlir', 'triton') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
