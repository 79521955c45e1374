"""The validation layer for every file a user (or a record) hands the workbench.

Files are checked before any work starts: encoding (UTF-8), syntax (JSON, TSV, ONNX protobuf), then
shape and types. A problem raises ``BadInput`` (a ``WorkbenchError``: one ``error:`` line, exit 1) that
names the file, the line or key, what is wrong and what to do.

- ``problem``: ``Where`` (file + line/key + the fix) and ``BadInput``.
- ``read``: bytes -> UTF-8 text -> JSON, with the position of the first bad byte or token.
- ``shape``: typed checks on parsed data (mapping, string, finite positive number, integer, choice).
- one module per kind of file: ``manifest`` (JSONL speech manifests), ``transcripts`` (``.txt`` sidecars
  and ``.tsv`` tables), ``gates``, ``plan`` (precision plans), ``candidates`` (ONNX candidates),
  ``cache`` (calibration cache sidecars), ``sets`` (stored speech sets), ``record`` (sign-off records).
"""
