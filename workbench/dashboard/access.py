"""Who may use the dashboard and what it may do, read from the environment on every page run.

``python -m workbench dashboard`` sets these variables for the Streamlit process it starts; with
``streamlit run app.py`` set them yourself:

- ``WORKBENCH_DASHBOARD_TOKEN`` (the token) or ``WORKBENCH_DASHBOARD_TOKEN_FILE`` (a file holding it):
  every visitor must enter it before any page renders (checked with ``hmac.compare_digest``).
- ``WORKBENCH_DASHBOARD_AUTH=oidc``: Streamlit's own OIDC login (``st.login``) instead of a token, for
  the accounts in ``WORKBENCH_DASHBOARD_ALLOWED_USERS`` (e-mail addresses and ``@domain`` entries).
- ``WORKBENCH_DASHBOARD_READ_ONLY=1``: no Run page, no download buttons.
- ``WORKBENCH_DASHBOARD_MAX_JOBS``: Run-page jobs running at once (default ``config.DASHBOARD.max_jobs``).
- ``WORKBENCH_DASHBOARD_RAY``: a Ray cluster address (``--ray``); the Run page may send jobs there, never elsewhere.

A dashboard bound to anything but a loopback address with neither a token nor OIDC renders nothing
(see ``gate``). Everything here is plain Python, so the verb and the tests use it without Streamlit.
"""

from __future__ import annotations

import ipaddress
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from workbench.cluster.address import ClusterAddress
from workbench.config import DASHBOARD
from workbench.errors import WorkbenchError

TOKEN_ENV = "WORKBENCH_DASHBOARD_TOKEN"
TOKEN_FILE_ENV = "WORKBENCH_DASHBOARD_TOKEN_FILE"
AUTH_ENV = "WORKBENCH_DASHBOARD_AUTH"
READ_ONLY_ENV = "WORKBENCH_DASHBOARD_READ_ONLY"
MAX_JOBS_ENV = "WORKBENCH_DASHBOARD_MAX_JOBS"
ALLOWED_USERS_ENV = "WORKBENCH_DASHBOARD_ALLOWED_USERS"
RAY_ENV = "WORKBENCH_DASHBOARD_RAY"
TRUE = ("1", "true", "yes", "on")
MAKE_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe(32))' > token.txt && chmod 600 token.txt"


@dataclass(frozen=True)
class Settings:
    """The access settings of one dashboard process."""

    read_only: bool = False
    max_jobs: int = DASHBOARD.max_jobs
    oidc: bool = False
    token: str | None = field(default=None, repr=False)
    allowed_users: tuple[str, ...] = ()
    ray: str | None = None  # the one Ray cluster the Run page may send jobs to

    def allows(self, email: str | None) -> bool:
        """Whether an OIDC account may in: its e-mail is listed, or its ``@domain`` is (case-insensitive)."""
        if not email or "@" not in email:
            return False
        email = email.strip().lower()
        return email in self.allowed_users or "@" + email.rsplit("@", 1)[1] in self.allowed_users

    @property
    def access_control(self) -> str | None:
        """How visitors are checked: ``"token"``, ``"oidc"`` or None (nobody is asked)."""
        return "oidc" if self.oidc else "token" if self.token else None


def is_loopback(address: str | None) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, ``localhost``).

    None or "" is Streamlit's "every interface", so it is not loopback; neither is any other host name.
    """
    if not address:
        return False
    if address.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def check_token(token: str, where: str) -> str:
    """``token`` without surrounding white space if it is long enough to share a dashboard with."""
    token = token.strip()
    if len(token) < DASHBOARD.min_token_chars:
        raise WorkbenchError(
            f"the access token in {where} has {len(token)} characters; use at least "
            f"{DASHBOARD.min_token_chars}, e.g. {MAKE_TOKEN}"
        )
    return token


def read_token_file(path: str | os.PathLike[str]) -> str:
    """The token in ``path``; the file must be a regular file that other users cannot read."""
    path = Path(path).expanduser()
    try:
        info = path.stat()
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkbenchError(
            f"cannot read the access token file {path}: {exc}. Make one with {MAKE_TOKEN}"
        ) from exc
    if not stat.S_ISREG(info.st_mode):
        raise WorkbenchError(f"the access token file {path} is not a regular file")
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise WorkbenchError(
            f"the access token file {path} can be read by other users of this machine; run: chmod 600 {path}"
        )
    return check_token(text, str(path))


def read_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings from ``environ`` (default ``os.environ``); a bad value is a user error, never ignored."""
    env = os.environ if environ is None else environ
    token = None
    if env.get(TOKEN_ENV):
        token = check_token(env[TOKEN_ENV], TOKEN_ENV)
    elif env.get(TOKEN_FILE_ENV):
        token = read_token_file(env[TOKEN_FILE_ENV])
    auth = env.get(AUTH_ENV, "").strip().lower()
    if auth not in ("", "token", "oidc"):
        raise WorkbenchError(f"{AUTH_ENV} must be 'token' or 'oidc', not {auth!r}")
    if auth == "token" and token is None:
        raise WorkbenchError(f"{AUTH_ENV}=token but neither {TOKEN_ENV} nor {TOKEN_FILE_ENV} is set")
    allowed = tuple(u.strip().lower() for u in env.get(ALLOWED_USERS_ENV, "").split(",") if u.strip())
    if auth == "oidc" and not allowed:
        raise WorkbenchError(
            f"{AUTH_ENV}=oidc needs {ALLOWED_USERS_ENV}: the e-mail addresses or @domains that "
            "may log in (an identity provider alone lets in every account it knows)"
        )
    return Settings(
        read_only=env.get(READ_ONLY_ENV, "").strip().lower() in TRUE,
        max_jobs=parse_max_jobs(env.get(MAX_JOBS_ENV), MAX_JOBS_ENV),
        oidc=auth == "oidc",
        token=token,
        allowed_users=allowed,
        ray=parse_ray(env.get(RAY_ENV)),
    )


def parse_ray(value: str | None) -> str | None:
    """A checked Ray cluster address (``workbench.cluster.address``), or None when not set."""
    if not value or not value.strip():
        return None
    ClusterAddress.parse(value)
    return value.strip()


def parse_max_jobs(value: str | int | None, where: str) -> int:
    """A job limit of at least 1 (None: the default)."""
    if value is None or value == "":
        return DASHBOARD.max_jobs
    try:
        number = int(value)
    except ValueError as exc:
        raise WorkbenchError(f"{where} takes a whole number of jobs, got {value!r}") from exc
    if number < 1:
        raise WorkbenchError(f"{where} must be at least 1 (read-only mode is how to allow no jobs)")
    return number


def reach(address: str | None, port: int) -> str:
    """Where a server bound to ``address``:``port`` can be reached from, in words."""
    host = f"[{address}]" if address and ":" in address else address
    if is_loopback(address):
        return f"this machine only: http://{host}:{port}"
    if not address or address in ("0.0.0.0", "::"):
        return f"every network interface of this machine, port {port}"
    return f"the network at http://{host}:{port}"
