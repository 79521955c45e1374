"""Data access for the dashboard: artifacts read through the library's own loaders, as plain tables.

One module per artifact kind (sets, calibration, reports, plans, layers). Functions take the
``ArtifactRoots`` and user-facing names, pass every path through ``paths.resolve`` and never write.
"""
