"""CLI verbs: each module has ``add_arguments(parser)`` and ``run(args) -> int``; no heavy imports at top."""
