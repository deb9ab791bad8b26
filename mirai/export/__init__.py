"""The export face: a @mirai.op function -> Triton kernels -> generated framework ops.

Its stages, each a function from frozen data to data, orchestrated only by `build.build`
(`mirai.build`):

    capture/   trace (Dynamo), AOTAutograd + Inductor for a target, the wrapper read as a
               KernelGraph of Triton kernel launches and cuBLAS GEMMs
    compile    each Triton kernel -> PTX + cubin per target, with its launch metadata
    plan       KernelGraph + binaries -> a typed, frozen ExportPlan (every field the templates read)
    render     ExportPlan -> the generated folder, through the Jinja2 templates in templates/
               (the runtime header opens the CUDA driver and cuBLASLt at run time)

and what runs and checks a generated folder: `launch` (its C interface from Python), `hostdriver/`
(the CPU stand-in for the CUDA driver) and `verify`. `graph` holds the data between the stages and
`symbolic` their size expressions. The explorer uses this package through `mirai.build` and
`capture.inductor_output_code` only. Importing this package imports nothing heavy.
"""
