"""The project file ``workbench.toml``: one model's whole INT8 job (data, recipe, search, gates, targets, decoders)."""
