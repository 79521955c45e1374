"""The one exception type for user-facing errors.

Anything the user can fix (bad input, missing artifact, wrong option) raises ``WorkbenchError``
with a message that says what to do. The CLI prints it and exits with status 1, no traceback.
"""


class WorkbenchError(Exception):
    """An error the user can act on; its message says what went wrong and what to do."""
