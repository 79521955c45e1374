"""Streamlit dashboard entry point: ``streamlit run app.py``.

Pages (sets, calibration, layers, trade-off, sign-off, run) live in ``workbench/dashboard/``; they read
artifacts under calib_sets/, engines/, reports/ and models/ (or ``$WORKBENCH_ARTIFACTS``) only.
"""

from workbench.dashboard.navigation import main

main()
