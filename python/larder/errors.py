"""Larder's exceptions: every error the client raises is a larder.Error.

Each class carries the Larder (absl/gRPC) status code it stands for, the
message, and the cluster path the call was about. Where Python has a built-in
class for the same condition the Larder class derives from it too, so that
code written for files keeps working: ``except FileNotFoundError`` catches a
missing Larder path.

    Error                     every Larder error (.code, .code_name, .path)
    NotFoundError             FileNotFoundError: no such path, or no mount
    IsADirectoryError_        IsADirectoryError: open() or read() of a directory
    PermissionDeniedError     PermissionError: the credential's role does not allow it
    UnauthenticatedError      PermissionDeniedError: no token, or a wrong one
    DeadlineExceededError     TimeoutError: a call ran past its deadline
    UnavailableError          ConnectionError: the master cannot be reached, or
                              every worker and the under-store failed
    ObjectChangedError        the object changed in the under-store since open()
    InvalidArgumentError      ValueError: a malformed path or option
    ResourceExhaustedError    a bound was reached (a directory too large to cache)
"""
import errno as _errno

# absl::StatusCode values.
_CODE_NAMES = {
    1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND", 6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED",
    8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION", 10: "ABORTED",
    11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE",
    15: "DATA_LOSS", 16: "UNAUTHENTICATED",
}


class Error(Exception):
    """A Larder error. ``code`` is the status code (an int, as absl and gRPC
    number them), ``code_name`` its name, ``message`` the server's words and
    ``path`` the cluster path the call was about ('' when none)."""

    code = 2
    _errno = None

    def __init__(self, message="", path="", code=None):
        if code is not None:
            self.code = code
        self.message = message
        self.path = path
        if self._errno is not None:  # An OSError: errno, strerror, filename.
            super().__init__(self._errno, message, path or None)
        else:
            super().__init__(message)

    @property
    def code_name(self):
        return _CODE_NAMES.get(self.code, str(self.code))

    def __str__(self):
        return "%s: %s" % (self.code_name, self.message)

    def __reduce__(self):  # Crosses process boundaries (DataLoader workers).
        return (type(self), (self.message, self.path, self.code))


class NotFoundError(Error, FileNotFoundError):
    code = 5
    _errno = _errno.ENOENT


class AlreadyExistsError(Error, FileExistsError):
    """An object is already at the path (open(path, "xb"), or a write
    without overwrite)."""
    code = 6
    _errno = _errno.EEXIST


class IsADirectoryError_(Error, IsADirectoryError):
    code = 3
    _errno = _errno.EISDIR


class PermissionDeniedError(Error, PermissionError):
    code = 7
    _errno = _errno.EACCES


class UnauthenticatedError(PermissionDeniedError):
    code = 16


class DeadlineExceededError(Error, TimeoutError):
    code = 4
    _errno = _errno.ETIMEDOUT


class UnavailableError(Error, ConnectionError):
    code = 14
    _errno = _errno.ECONNREFUSED


class ObjectChangedError(Error):
    code = 9


class InvalidArgumentError(Error, ValueError):
    code = 3


class ResourceExhaustedError(Error):
    code = 8


_BY_CODE = {
    3: InvalidArgumentError, 4: DeadlineExceededError, 5: NotFoundError,
    6: AlreadyExistsError,
    7: PermissionDeniedError, 8: ResourceExhaustedError, 9: ObjectChangedError,
    14: UnavailableError, 16: UnauthenticatedError,
}


def from_status(code, message, path=""):
    """The exception for a status (called by the native module)."""
    if code == 3 and message.endswith("is a directory"):
        return IsADirectoryError_(message, path)
    cls = _BY_CODE.get(code, Error)
    return cls(message, path, code)
