"""Streamlit dashboard entry point: ``streamlit run app.py``.

Pages (sets, calibration, layers, trade-off, sign-off, run) live in ``workbench/dashboard/``; they read
artifacts under the workspace's calib_sets/, engines/, reports/ and models/ only. The workspace:
``streamlit run app.py -- --workspace DIR``, else ``$WORKBENCH_WORKSPACE``, else the current directory.
"""

from workbench.dashboard.navigation import main

main()
