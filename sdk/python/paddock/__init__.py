"""Paddock's Python SDK: isolated Linux computers and sandboxes for agents.

    from paddock import Paddock
    client = Paddock()                       # $PADDOCK_HOST / $PADDOCK_TOKEN / $PADDOCK_SOCKET
    with client.envs.create(kind="sandbox") as env:
        print(env.exec("echo hello").text)

Standard library only; Python 3.9 or later."""
from .client import Envs, Event, Paddock, Tokens, __version__
from .env import Env, Files, OutputStream, Process, Procs, Watch
from .errors import (CommandTimeout, Conflict, ConnectionError, Forbidden, InsufficientStorage,
                     InvalidArgument, MethodNotAllowed, NotFound, PaddockError, ProtocolError,
                     QuotaExceeded, RateLimited, ServerError, TooLarge, Unauthorized,
                     Unavailable, Unprocessable)
from .pty import PtySession
from .results import CommandFailed, ExecResult, FileInfo, Snapshot, WatchEvent

__all__ = [
    "Paddock", "Envs", "Tokens", "Event", "Env", "Files", "Procs", "Process", "OutputStream", "Watch",
    "PtySession", "ExecResult", "CommandFailed", "FileInfo", "Snapshot", "WatchEvent",
    "PaddockError", "InvalidArgument", "Unauthorized", "Forbidden", "QuotaExceeded",
    "NotFound", "MethodNotAllowed", "Conflict", "TooLarge", "Unprocessable", "RateLimited",
    "ServerError", "Unavailable", "InsufficientStorage", "CommandTimeout", "ConnectionError",
    "ProtocolError", "__version__",
]
