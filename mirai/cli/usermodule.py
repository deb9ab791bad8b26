"""What the subcommands share: importing the user's Python file that defines the op."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from mirai.errors import MiraiError


def load_user_module(path: Path):
    """Import a user's Python file as a module of its own (Dynamo needs the function's module)."""
    path = Path(path)
    if not path.is_file():
        raise MiraiError(f"no such file: {path}")
    name = f"mirai_user_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    return module
