"""Precision plan files (``compare --plan``): ``{"name": ..., "default": "int8", "overrides": {"<node>": "fp16"}}``.

``name`` names the variant's file, so it is letters, digits, ``.``, ``_``, ``+`` or ``-``; ``default`` and
every override are one of int8, fp16, fp32; override keys are node names (checked against the model later).
Optional: ``rest`` (fp16 or fp32: every node that is not MatMul/Gemm/Conv) and ``keep_fp32`` (node -> reason);
``nodes`` and ``counts`` (written with the plan, every node's placement) are accepted and not read.
"""

from __future__ import annotations

import re
from typing import Any

from workbench.inputs import shape
from workbench.inputs.problem import Where

PRECISIONS = ("int8", "fp16", "fp32")
FLOAT_TYPES = ("fp16", "fp32")
PLAN_NAME = re.compile(r"[A-Za-z0-9][\w.+-]{0,119}")
FIX = (
    'give a JSON object {"name": ..., "default": "int8", "overrides": {"<node>": "fp16"}}, '
    "like the plan.<name>.json that python -m workbench search writes"
)


def check_plan(data: Any, where: Where) -> dict[str, Any]:
    obj = shape.mapping(data, where)
    shape.only_keys(
        obj, ("name", "default", "overrides", "rest", "keep_fp32", "nodes", "counts", "recovery"), where
    )
    name = shape.string(obj.get("name"), where.key("name"))
    if not PLAN_NAME.fullmatch(name):
        raise where.key("name").fail(
            f"{name!r} must be letters, digits, '.', '_', '+' or '-' (it names the "
            "variant's file); rename it in the file"
        )
    shape.choice(obj.get("default", "fp32"), PRECISIONS, where.key("default"))
    for node, precision in shape.mapping(obj.get("overrides", {}), where.key("overrides")).items():
        shape.choice(precision, PRECISIONS, where.key("overrides").key(node))
    if obj.get("rest") is not None:
        shape.choice(obj["rest"], FLOAT_TYPES, where.key("rest"))
    for node, reason in shape.mapping(obj.get("keep_fp32", {}), where.key("keep_fp32")).items():
        shape.string(reason, where.key("keep_fp32").key(node))
    return obj
