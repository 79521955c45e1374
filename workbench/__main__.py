"""``python -m workbench``: hands over to the command-line interface."""

from workbench.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
