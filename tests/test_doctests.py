"""The examples in mirai's docstrings run: every module's doctests, collected from the package."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import mirai


def modules_with_examples() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(mirai.__path__, prefix="mirai."):
        spec = importlib.util.find_spec(info.name)
        if spec and spec.origin and spec.origin.endswith(".py"):
            with open(spec.origin, encoding="utf-8") as f:
                if ">>>" in f.read():
                    names.append(info.name)
    return sorted(names)


MODULES = modules_with_examples()


def test_the_package_has_examples():
    assert len(MODULES) >= 10, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"
