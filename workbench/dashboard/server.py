"""How the dashboard's Streamlit server is started: the packaged entry script, the packaged Streamlit
settings (``entry/.streamlit/config.toml`` next to it, the one place they are written), and the command line
and environment ``python -m workbench dashboard`` hands to ``streamlit run``.

Every setting of the packaged file is passed as a ``--section.key=value`` flag, so the server gets them
whatever the working folder and Streamlit version; the address and port are the verb's.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from workbench.dashboard import access
from workbench.errors import WorkbenchError
from workbench.workspace import ENV_VAR as WORKSPACE_ENV
from workbench.workspace import LEGACY_ENV_VAR

HERE = Path(__file__).resolve().parent
APP = HERE / "entry" / "app_main.py"
CONFIG = HERE / "entry" / ".streamlit" / "config.toml"
# on a server others can reach, an unexpected exception shows its type only (the trace goes to the log)
SHARED_OPTIONS: dict[str, Any] = {"client.showErrorDetails": "type"}


def config_options(path: Path = CONFIG) -> dict[str, Any]:
    """The packaged Streamlit settings as ``{"server.address": "127.0.0.1", ...}``."""
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    return {f"{section}.{key}": value for section, values in data.items() for key, value in values.items()}


def _flag(name: str, value: Any) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return f"--{name}={text}"


@dataclass(frozen=True)
class Launch:
    """What to run: ``argv`` with ``env`` (the access settings for the app in its environment)."""

    argv: list[str]
    env: dict[str, str] = field(repr=False)
    address: str
    port: int


def launch(
    address: str,
    port: int,
    *,
    read_only: bool = False,
    token_file: Path | None = None,
    oidc: bool = False,
    allowed_users: str | None = None,
    max_jobs: int | None = None,
    workspace: Path | None = None,
    environ: dict[str, str] | None = None,
    ray: str | None = None,
) -> Launch:
    """The ``streamlit run`` command line and environment for these options; refuses unsafe ones.

    An address other machines can reach needs an access control (a token or OIDC); the resulting
    settings are read back with ``access.read_settings``, exactly as the app will, so a bad token
    file or setting is refused here rather than by a server that shows nothing.
    """
    env = dict(os.environ if environ is None else environ)
    for name in (
        access.READ_ONLY_ENV,
        access.AUTH_ENV,
        access.MAX_JOBS_ENV,
        access.ALLOWED_USERS_ENV,
        access.RAY_ENV,
    ):
        env.pop(name, None)
    if token_file is not None:
        env.pop(access.TOKEN_ENV, None)
        env[access.TOKEN_FILE_ENV] = str(Path(token_file).expanduser().resolve())
    if read_only:
        env[access.READ_ONLY_ENV] = "1"
    if oidc:
        env[access.AUTH_ENV] = "oidc"
        env[access.ALLOWED_USERS_ENV] = allowed_users or ""
    if max_jobs is not None:
        env[access.MAX_JOBS_ENV] = str(max_jobs)
    if ray is not None:  # checked by read_settings below, as the app will
        env[access.RAY_ENV] = ray
    if workspace is not None:  # the server and the jobs it starts read and write there
        env.pop(LEGACY_ENV_VAR, None)
        env[WORKSPACE_ENV] = str(Path(workspace).expanduser().resolve())
    settings = access.read_settings(env)
    shared = not access.is_loopback(address)
    if shared and settings.access_control is None:
        raise WorkbenchError(
            f"--address {address or '(every interface)'} lets other machines reach the dashboard, so it needs an "
            f"access control: --token-file FILE (make one with: {access.MAKE_TOKEN}), or --oidc with "
            "--allowed-users and an [auth] section in .streamlit/secrets.toml; see docs/dashboard.md"
        )
    if not 0 < port < 65536:
        raise WorkbenchError(f"--port must be between 1 and 65535, got {port}")
    options = {**config_options(), "server.address": address, "server.port": port}
    if shared:
        options.update(SHARED_OPTIONS)
    argv = [sys.executable, "-m", "streamlit", "run", str(APP), *(_flag(k, v) for k, v in options.items())]
    return Launch(argv, env, address, port)
