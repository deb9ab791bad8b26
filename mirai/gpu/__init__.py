"""The GPU side of mirai's core, shared by the export and explorer faces.

- `targets`: the Target type, its registry and the parser of every spelling of a target;
- `precision`: the precision modes of a build (what matmuls and dtypes they mean, their tolerances);
- `offline`: the one offline Triton driver (compiling for a target with no GPU present);
- `kernels`: loading the kernel modules Inductor generates;
- `versions`: the torch/Triton releases the internals-dependent code knows.
"""
