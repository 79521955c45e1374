"""The dashboard's entry script (``app_main.py``) and its Streamlit settings (``.streamlit/config.toml``).

They live in a folder of their own because Streamlit treats a ``pages/`` folder next to the entry
script as a multipage app of its own (every file a page, no ``st.navigation``, no access gate); the
page modules are in ``workbench/dashboard/pages/``, one level up.
"""
