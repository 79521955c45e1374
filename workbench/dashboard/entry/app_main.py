"""The dashboard's entry script inside the package: ``python -m workbench dashboard`` runs
``streamlit run`` on this file, so it works from a wheel; ``app.py`` at the repository root is the same.
No ``pages/`` folder may sit next to it (see ``entry/__init__.py``)."""

from workbench.dashboard.navigation import main

main()
