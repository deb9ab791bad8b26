"""TensorFlow: a custom op per generated op (tf_op.cc.j2), build.sh, and the Python API that joins the
forward and backward ops with tf.custom_gradient (api.py.j2).

    generated/PffnFwd.cc PffnBwd.cc build.sh pffn_api.py
"""

from __future__ import annotations

from mirai.export.frameworks import api_fields
from mirai.export.plan import py_op_name


def files(env, common: dict, export) -> dict[str, str]:
    out = {}
    for op in export.ops:
        out[f"{op.op_name}.cc"] = env.get_template("tf_op.cc.j2").render(
            **common, **op.template_fields()
        )
    snake = py_op_name(export.name)
    out["build.sh"] = env.get_template("build.sh.j2").render(
        **common, name=export.name, ops=[op.op_name for op in export.ops]
    )
    out[f"{snake}_api.py"] = _api(env, common, export, snake)
    return out


def _api(env, common, export, snake: str) -> str:
    fields = api_fields(export)
    n_user = fields["num_outputs"]
    specs = lambda items: repr(  # noqa: E731
        tuple((i.tf_name, i.dtype, tuple(i.shape)) for i in items)
    )
    return env.get_template("api.py.j2").render(
        **common,
        **fields,
        module=f"{snake}_api",
        function=snake,
        input_specs=specs(export.forward.inputs),
        output_specs=specs(export.forward.outputs[:n_user]),
    )
