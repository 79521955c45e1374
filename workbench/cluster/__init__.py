"""Spreading the workbench's parallel work over a Ray cluster (``--ray ADDRESS``); optional, Ray imports lazily.

``address`` parses ``--ray`` (``local:N``, ``auto``, a cluster address) and connects; ``pool`` keeps one worker
actor per CPU (or GPU), refuses a worker whose check set disagrees with the reference, hands out tasks and
retries a lost worker's task on another; ``check`` is the check set (a few clips whose logits must equal the
driver's within a tolerance); ``worker`` is what runs inside each actor (one ONNX Runtime session per
model, models and sets fetched from the object store once); ``shards`` balances clips by audio duration;
``calibrate``, ``compare``, ``search`` and ``signoff`` hold the tasks of those jobs and the
deterministic merges of their results.
"""
