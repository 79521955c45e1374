"""``--ray ADDRESS``: which Ray cluster to use (``local:N``, ``auto``, an address) and connecting to it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType

from workbench.config import RAY_INSTALL_HINT
from workbench.errors import WorkbenchError
from workbench.optional import import_optional

LOCAL_PREFIX = "local:"


@dataclass(frozen=True)
class ClusterAddress:
    """A parsed ``--ray`` value: ``local`` workers on this machine (a cluster started for the job and stopped
    after it), or the ``address`` of a running cluster (``auto``: the one this machine belongs to)."""

    address: str | None = None
    local: int | None = None

    @classmethod
    def parse(cls, text: str) -> ClusterAddress:
        value = str(text).strip()
        if value.startswith(LOCAL_PREFIX):
            count = value[len(LOCAL_PREFIX) :]
            if not count.isdigit() or int(count) < 1:
                raise WorkbenchError(
                    f"--ray {text!r}: local:N takes a whole number of workers of at least 1, e.g. local:4"
                )
            return cls(local=int(count))
        scheme, sep, rest = value.partition("://")
        if sep and not rest.strip("/"):
            raise WorkbenchError(
                f"--ray {text!r}: the address after {scheme}:// is empty; give the head's host and port, e.g. "
                "ray://head:10001"
            )
        if not value or any(c.isspace() for c in value):
            raise WorkbenchError(
                f"--ray {text!r}: give local:N (a local cluster of N workers), auto (the cluster this "
                "machine belongs to) or a cluster address such as ray://head:10001"
            )
        return cls(address=value)

    def describe(self) -> str:
        return (
            f"a local Ray cluster of {self.local} workers"
            if self.local
            else f"the Ray cluster at {self.address}"
        )


def require_ray() -> ModuleType:
    """The ``ray`` module, or one error line saying how to install it."""
    return import_optional("ray", RAY_INSTALL_HINT)


@contextmanager
def connected(address: ClusterAddress) -> Iterator[ModuleType]:
    """Ray connected to ``address`` for the block. A local cluster is started with ``local`` CPUs and shut down
    after; a running cluster is joined and left running. A session already connected (tests, notebooks) is
    used as it is."""
    import logging

    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    options = {"logging_level": logging.WARNING, "log_to_driver": False, "include_dashboard": False}
    try:
        if address.local:
            ray.init(num_cpus=address.local, **options)
        else:
            ray.init(address=address.address, **options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise WorkbenchError(
            f"could not connect to {address.describe()}: {str(exc).splitlines()[0] if str(exc) else exc!r}; "
            "start it with 'ray start --head' or give local:N"
        ) from exc
    try:
        yield ray
    finally:
        ray.shutdown()
