"""mirai: PyTorch functions -> Triton kernels -> TensorFlow custom ops, and an explorer of every IR on the way.

Public surface::

    import mirai

    @mirai.op(name="Pffn")
    def pffn(x, w):
        return torch.relu(x @ w)

    mirai.build(pffn, sample_inputs=[x, w], output_dir="generated", target="sm_90")
"""

from mirai.errors import MiraiError
from mirai.export.decorator import op
from mirai.export.build import build

__version__ = "0.3.0"

__all__ = ["op", "build", "MiraiError", "__version__"]
