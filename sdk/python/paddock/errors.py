"""Typed exceptions. Every error the daemon answers is a JSON object
``{"error": {"code": ..., "message": ...}}``; the SDK raises the subclass of :class:`PaddockError`
that matches the code (or, failing that, the HTTP status), carrying the server's code and
message unchanged."""
import builtins


class PaddockError(Exception):
    """Base class of every error the SDK raises.

    Attributes: ``status`` (HTTP status, ``None`` when no answer came), ``code`` (the server's
    error code such as ``"not_found"``), ``message`` (the server's message), ``method`` and
    ``path`` of the request that failed."""

    def __init__(self, message, code=None, status=None, method=None, path=None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.method = method
        self.path = path

    def __str__(self):
        head = ""
        if self.status is not None:
            head = "%s %s: " % (self.status, self.code or "error")
        elif self.code:
            head = "%s: " % self.code
        return head + str(self.message)


class InvalidArgument(PaddockError):
    """400 ``invalid_argument``: a malformed request, a bad or unknown field."""


class Unauthorized(PaddockError):
    """401 ``unauthorized``: a missing, wrong, expired or revoked token."""


class Forbidden(PaddockError):
    """403 ``forbidden``: not allowed (by the token, or inside the environment)."""


class QuotaExceeded(Forbidden):
    """403 ``quota_exceeded``: the token's quota (environments, cpus, memory, disk) is used up."""


class NotFound(PaddockError):
    """404 ``not_found``: no such environment, process, snapshot, file, image or route."""


class MethodNotAllowed(PaddockError):
    """405 ``method_not_allowed``."""


class Conflict(PaddockError):
    """409 ``conflict``: the name exists, or the environment is in the wrong state."""


class TooLarge(PaddockError):
    """413/414 ``too_large``: a body or a result over its limit."""


class Unprocessable(PaddockError):
    """422 ``unprocessable``: well-formed but impossible (e.g. snapshots of a sandbox)."""


class RateLimited(PaddockError):
    """429 ``rate_limited``; ``retry_after`` is the server's Retry-After in seconds (or None)."""

    def __init__(self, message, retry_after=None, **kw):
        super().__init__(message, **kw)
        self.retry_after = retry_after


class ServerError(PaddockError):
    """500 ``internal``: a failure of the daemon."""


class Unavailable(PaddockError):
    """503 ``unavailable``: a limit of concurrent work was reached; try again later."""


class InsufficientStorage(PaddockError):
    """507 ``insufficient_storage``: the disk or a quota is full."""


class CommandTimeout(PaddockError):
    """An exec ran past its ``timeout``; the daemon killed its process tree. ``result`` holds the
    :class:`~paddock.ExecResult` with the output up to then."""

    def __init__(self, message, result=None, **kw):
        super().__init__(message, code="timeout", **kw)
        self.result = result


class ConnectionError(PaddockError, builtins.ConnectionError):
    """The daemon could not be reached, the connection broke, or the server's certificate did
    not verify (wrong CA or fingerprint). Also an instance of the built-in ConnectionError."""


class ProtocolError(PaddockError):
    """The daemon's answer was not what the API documents (bad JSON, a broken stream)."""


_BY_CODE = {
    "invalid_argument": InvalidArgument,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "quota_exceeded": QuotaExceeded,
    "not_found": NotFound,
    "method_not_allowed": MethodNotAllowed,
    "conflict": Conflict,
    "too_large": TooLarge,
    "unprocessable": Unprocessable,
    "rate_limited": RateLimited,
    "internal": ServerError,
    "unavailable": Unavailable,
    "insufficient_storage": InsufficientStorage,
}

_BY_STATUS = {
    400: InvalidArgument, 401: Unauthorized, 403: Forbidden, 404: NotFound,
    405: MethodNotAllowed, 409: Conflict, 413: TooLarge, 414: TooLarge, 422: Unprocessable,
    429: RateLimited, 500: ServerError, 503: Unavailable, 507: InsufficientStorage,
}


def error_for(status, code, message, method=None, path=None, retry_after=None):
    """The exception for an error answer (by code first, then by status)."""
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status) or PaddockError
    kw = dict(code=code, status=status, method=method, path=path)
    if cls is RateLimited:
        return cls(message, retry_after=retry_after, **kw)
    return cls(message, **kw)
