"""Errors mirai raises for bad input or an unsupported feature: each says what is wrong and what to do."""


class MiraiError(Exception):
    """Base of every error mirai raises on purpose."""


class UnsupportedError(MiraiError):
    """The function uses something the export face cannot turn into Triton kernels."""


class CaptureError(MiraiError):
    """torch.compile could not capture the function."""


class CompileError(MiraiError):
    """A Triton kernel could not be compiled for the target."""


class VersionError(MiraiError):
    """The installed torch/triton is one that mirai's internals-dependent code does not know."""
