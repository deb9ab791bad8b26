"""The GPU side of mirai's core, shared by the export and explorer faces.

- `precision`: the precision modes of a build (what matmuls and dtypes they mean, their tolerances).
"""
