"""Streamlit dashboard entry point: ``streamlit run app.py`` (or ``python -m workbench dashboard``).

A shim: the app is ``workbench/dashboard/entry/app_main.py`` (pages in ``workbench/dashboard/``); it
reads artifacts under the workspace's calib_sets/, engines/, reports/ and models/ only. The workspace:
``streamlit run app.py -- --workspace DIR``, else ``$WORKBENCH_WORKSPACE``, else the current directory.
Streamlit settings (127.0.0.1 only, XSRF on, no usage statistics) come from ``.streamlit/config.toml``;
docs/dashboard.md says how to share it safely.
"""

from workbench.dashboard.navigation import main

main()
