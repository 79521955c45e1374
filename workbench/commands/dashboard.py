"""``python -m workbench dashboard``: serve the Streamlit dashboard, on 127.0.0.1 unless told otherwise.

Runs ``streamlit run`` on the packaged entry script with the packaged settings (so it works from a wheel
and from any folder), replacing this process. ``--address`` with anything but a loopback address needs
``--token-file`` or ``--oidc``; ``--read-only`` hides the Run page and every download. See docs/dashboard.md.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.config import DASHBOARD
from workbench.values import whole_number

if TYPE_CHECKING:
    from workbench.dashboard.server import Launch


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from workbench.dashboard.server import config_options

    defaults = config_options()
    parser.add_argument(
        "--address",
        default=defaults["server.address"],
        help="address to listen on (default %(default)s: this machine only); another address "
        "needs --token-file or --oidc",
    )
    parser.add_argument(
        "--port",
        type=whole_number(1, 65535),
        default=defaults["server.port"],
        help="port (default %(default)s)",
    )
    parser.add_argument("--read-only", action="store_true", help="no Run page and no download buttons")
    parser.add_argument(
        "--token-file",
        type=Path,
        help="file holding the access token every visitor must enter (chmod 600; at least 16 "
        "characters); WORKBENCH_DASHBOARD_TOKEN in the environment works too",
    )
    parser.add_argument(
        "--oidc",
        action="store_true",
        help="visitors log in with Streamlit's OIDC login (st.login; [auth] in "
        ".streamlit/secrets.toml) instead of a token",
    )
    parser.add_argument("--allowed-users", help="with --oidc: comma-separated e-mail addresses and @domains")
    parser.add_argument(
        "--max-jobs",
        type=whole_number(1),
        default=None,
        help=f"Run-page jobs running at once (default {DASHBOARD.max_jobs})",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="a Ray cluster (local:N, auto or an address) the Run page may send calibrate, compare, search and "
        "sign-off jobs to (a checkbox on each form; docs/ray.md)",
    )


def launch_from_args(args: argparse.Namespace) -> Launch:
    """What ``run`` executes; refuses unsafe or bad options (see ``server.launch``) without starting anything."""
    from workbench.dashboard.access import parse_max_jobs
    from workbench.dashboard.server import launch
    from workbench.workspace import Workspace, resolve_workspace

    if args.max_jobs is not None:
        parse_max_jobs(args.max_jobs, "--max-jobs")
    return launch(
        args.address,
        args.port,
        read_only=args.read_only,
        token_file=args.token_file,
        oidc=args.oidc,
        allowed_users=args.allowed_users,
        max_jobs=args.max_jobs,
        ray=args.ray,
        workspace=(
            args.workspace
            if isinstance(args.workspace, Workspace)  # filled by the CLI
            else resolve_workspace(args.workspace)
        ).root,
    )


def run(args: argparse.Namespace) -> int:
    import importlib.util

    from workbench.dashboard.access import reach
    from workbench.errors import WorkbenchError

    if importlib.util.find_spec("streamlit") is None:
        raise WorkbenchError("the dashboard needs Streamlit: pip install 'workbench[app]'")
    started = launch_from_args(args)
    print(
        f"dashboard: reachable from {reach(started.address, started.port)}"
        + (" (read-only)" if args.read_only else ""),
        flush=True,
    )
    os.execvpe(started.argv[0], started.argv, started.env)
    return 0  # not reached: streamlit replaced this process
