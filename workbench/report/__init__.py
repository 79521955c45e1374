"""Sign-off reports: a versioned JSON record, rendered to Markdown and self-contained HTML.

This package only renders a record it is given (the sign-off job, ``workbench.jobs.signoff``, makes it):
``record`` builds and verifies the record (schema version, provenance hashes); ``plots`` draws the
figures as base64 PNG; ``render`` turns a record into Markdown and HTML; ``write_report`` writes all
three atomically.
"""

from workbench.report.record import RECORD_SCHEMA, RECORD_VERSION, load_record, verify_inputs  # noqa: F401
from workbench.report.render import write_report  # noqa: F401
