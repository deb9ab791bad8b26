"""The seed's pffn exported with a dynamic batch dimension: one op binary serves every batch size.

    python examples/pffn_dynamic.py        # or: mirai build examples/pffn_dynamic.py
    cd generated && bash build.sh

On the TensorFlow side the same op then runs at any batch size, e.g. pffn(inputs_2000, ...) and
pffn(inputs_8000, ...).
"""

import mirai
from pffn import pffn, sample_inputs

MIRAI_BUILD = {"op": pffn, "sample_inputs": sample_inputs, "dynamic": True}

if __name__ == "__main__":
    mirai.build(pffn, sample_inputs=sample_inputs(), dynamic=True)
