"""`mirai.build`: the export pipeline, capture -> compile -> render, orchestrated in one call."""


def build(*args, **kwargs):
    raise NotImplementedError
