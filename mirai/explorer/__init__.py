"""The explorer face: an HTTP service that turns PyTorch, Triton or raw IR into the IR of any stage.

    mirai serve --port 8000
    curl -X POST localhost:8000/generate_ir -H 'Content-Type: application/json' \\
         -d '{"code": "...", "ir_type": "torch_mlir"}'

The wire contract is the integration guide (endpoints, fields, ir_type values, `&&` chaining, tool
aliases, delimiters); see docs/explorer.md. The server process never runs user code: a pool of pre-warmed
worker processes (`mirai.explorer.worker`) does.
"""
