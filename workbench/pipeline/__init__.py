"""``workbench run``: a project's steps in order, each skipped when its inputs' hash matches a finished result."""
