"""The Streamlit dashboard (``streamlit run app.py``): one module per page under ``pages/``.

``paths`` confines every file the app reads or serves to the artifact folders, ``data`` reads the
artifacts through the library's own loaders, ``charts`` draws them with Altair, ``jobs`` runs
``python -m workbench ...`` in the background for the Run page. Nothing here changes an artifact.
"""
