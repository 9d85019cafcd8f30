"""Larder: read a training dataset through the cluster's cache.

    import larder
    client = larder.Client("larder-master:7060")   # or $LARDER_MASTER
    data = client.read("/datasets/imagenet/train/n01440764/x.JPEG")

PyTorch datasets and the shuffle-aware prefetching sampler are in
``larder.torch`` (imported on demand: ``import larder`` works without torch);
``larder.fs`` registers the ``larder://`` fsspec protocol.
"""
from .errors import (AlreadyExistsError, DeadlineExceededError, Error, InvalidArgumentError,
                     IsADirectoryError_, NotFoundError, ObjectChangedError,
                     PermissionDeniedError, ResourceExhaustedError,
                     UnauthenticatedError, UnavailableError)
from .client import Client, FileInfo, LarderFile, LarderWriter

__all__ = [
    "Client", "FileInfo", "LarderFile", "LarderWriter", "Error", "NotFoundError",
    "IsADirectoryError_", "PermissionDeniedError", "UnauthenticatedError",
    "DeadlineExceededError", "UnavailableError", "ObjectChangedError",
    "InvalidArgumentError", "ResourceExhaustedError", "AlreadyExistsError",
]
__version__ = "0.1.0"
