"""The one error type of the explorer: it carries the guide's `message` and `detail` to the client."""

from __future__ import annotations

from mirai.errors import MiraiError


class ExplorerError(MiraiError):
    """An error a client caused or must see: answered as {status: error, message, detail}.

    >>> ExplorerError("IR type not supported").as_response()
    {'status': 'error', 'message': 'IR type not supported', 'detail': ''}
    """

    def __init__(
        self,
        message: str,
        detail: str = "",
        http_status: int = 200,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail
        self.http_status = http_status  # the guide answers its errors with 200; others may differ
        self.headers = headers or {}  # HTTP headers of the answer (e.g. Retry-After)

    def as_response(self) -> dict:
        return error_response(self.message, self.detail)


def error_response(message: str, detail: str = "") -> dict:
    """The guide's failure shape (§2.1)."""
    return {"status": "error", "message": message, "detail": detail}


def ok_response(output: str) -> dict:
    """The guide's success shape (§2.1)."""
    return {"status": "ok", "output": output}
