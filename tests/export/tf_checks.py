"""TensorFlow-side checks of a generated folder, run in a process of their own (no torch here).

    python tf_checks.py DIR trace [BATCH|none]   # shapes and gradient wiring in a tf.function trace
    python tf_checks.py DIR bad-shape             # a wrong static dimension is refused at trace time
    python tf_checks.py DIR wrong-dtype           # float32 into an fp16/bf16 op is refused
    python tf_checks.py DIR run-cpu               # running on a CPU-only TensorFlow fails cleanly
    python tf_checks.py trace-many BATCH DIR...    # `trace` for several folders, one JSON object
    python tf_checks.py forward-many BATCH DIR...  # the same without the gradient (inference builds)

Prints one JSON line with what it saw.
"""

import importlib.util
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402


def load_api(directory):
    name = next(f for f in os.listdir(directory) if f.endswith("_api.py"))
    spec = importlib.util.spec_from_file_location(name[:-3], os.path.join(directory, name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, name[: -len("_api.py")])
    return module, fn


def source(tensor):
    """The op (type, output index) a tensor comes from, looking through Identity ops."""
    while tensor.op.type in ("Identity", "IdentityN"):
        tensor = tensor.op.inputs[tensor.value_index if tensor.op.type == "IdentityN" else 0]
    return tensor.op.type, tensor.value_index, tensor.op.name


def specs(module, batch):
    out = []
    for name, dtype, sizes in module.INPUTS:
        dims = [
            None if (not s.isdigit() and batch is None) else (batch if not s.isdigit() else int(s))
            for s in sizes
        ]
        out.append(tf.TensorSpec(dims, tf.as_dtype(dtype), name=name))
    return out


def trace(directory, batch_arg, emit=True, gradients=True):
    """What a tf.function trace of the folder's API shows; with `gradients`, of the API called
    under a GradientTape and differentiated with respect to every input."""
    module, fn = load_api(directory)
    batch = None if batch_arg == "none" else int(batch_arg)
    input_specs = specs(module, batch)

    @tf.function
    def step(*args):
        with tf.GradientTape() as tape:
            for a in args:
                tape.watch(a)
            y = fn(*args)
        return y, tape.gradient(y, args, unconnected_gradients="none")

    @tf.function
    def forward(*args):
        return fn(*args), [None] * len(args)

    concrete = (step if gradients else forward).get_concrete_function(*input_specs)
    graph = concrete.graph
    y, grads = concrete.structured_outputs
    fwd = [op for op in graph.get_operations() if op.type.endswith("Fwd")]
    bwd = [op for op in graph.get_operations() if op.type.endswith("Bwd")]
    placeholders = {
        op.name: i
        for i, op in enumerate(o for o in graph.get_operations() if o.type == "Placeholder")
    }
    wiring = []
    for t in bwd[0].inputs if bwd else []:
        kind, index, name = source(t)
        wiring.append({"op": kind, "index": index, "placeholder": placeholders.get(name)})
    outputs = y if isinstance(y, (tuple, list)) else (y,)
    seen = {
        "output_shapes": [o.shape.as_list() for o in outputs],
        "output_shape": outputs[0].shape.as_list(),
        "grad_shapes": [g.shape.as_list() if g is not None else None for g in grads],
        "grad_sources": [list(source(g)[:2]) if g is not None else None for g in grads],
        "fwd_ops": [op.type for op in fwd],
        "bwd_ops": [op.type for op in bwd],
        "fwd_output_shapes": [o.shape.as_list() for o in fwd[0].outputs],
        "bwd_inputs": [t.shape.as_list() for t in (bwd[0].inputs if bwd else [])],
        "bwd_wiring": wiring,
        "input_shapes": [s.shape.as_list() for s in input_specs],
    }
    if emit:
        print(json.dumps(seen))
    return seen


def trace_many(batch_arg, directories, gradients=True):
    """`trace` for several folders in one process: {folder: what trace saw, or the error}."""
    seen = {}
    for directory in directories:
        try:
            seen[directory] = trace(directory, batch_arg, emit=False, gradients=gradients)
        except Exception as err:  # noqa: BLE001 - reported to the test
            seen[directory] = {"error": f"{type(err).__name__}: {err}"[:2000]}
    print(json.dumps(seen))


def report_trace_error(fn, input_specs):
    """Trace `fn` for `input_specs`; print the error it raises (or none) as JSON."""
    try:
        tf.function(fn).get_concrete_function(*input_specs)
    except Exception as err:  # noqa: BLE001 - the message is the result
        print(json.dumps({"error": type(err).__name__, "message": str(err)[:2000]}))
        return
    print(json.dumps({"error": None}))


def bad_shape(directory):
    module, fn = load_api(directory)
    input_specs = specs(module, None)
    first = input_specs[-1]  # change a static dimension of the last input
    dims = first.shape.as_list()
    dims[-1] = (dims[-1] or 1) + 1
    input_specs[-1] = tf.TensorSpec(dims, first.dtype)
    report_trace_error(fn, input_specs)


def wrong_dtype(directory):
    """Float32 tensors given to ops built for another float type are refused at trace time."""
    module, fn = load_api(directory)
    input_specs = [
        tf.TensorSpec(s.shape, tf.float32) if s.dtype.is_floating else s
        for s in specs(module, None)
    ]
    report_trace_error(fn, input_specs)


def run_cpu(directory):
    module, fn = load_api(directory)
    args = []
    for spec in specs(module, 3):
        args.append(tf.zeros([d if d is not None else 3 for d in spec.shape.as_list()], spec.dtype))
    try:
        fn(*args)
    except Exception as err:  # noqa: BLE001
        print(json.dumps({"error": type(err).__name__, "message": str(err)[:2000]}))
        return
    print(json.dumps({"error": None}))


if __name__ == "__main__":
    if sys.argv[1] in ("trace-many", "forward-many"):
        trace_many(sys.argv[2], sys.argv[3:], gradients=sys.argv[1] == "trace-many")
        sys.exit(0)
    directory, command, *rest = sys.argv[1:]
    {
        "trace": lambda: trace(directory, rest[0] if rest else "none"),
        "bad-shape": lambda: bad_shape(directory),
        "run-cpu": lambda: run_cpu(directory),
        "wrong-dtype": lambda: wrong_dtype(directory),
    }[command]()
