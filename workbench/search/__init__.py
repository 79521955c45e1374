"""Mixed-precision search: the INT8/FP16 plan with the most INT8 whose dev-set WER stays within the budget.

``evaluator`` (full WER evaluation of a plan on a dev set, judged like the sign-off), ``strategies``
(bisection / galloping over k, the number of most sensitive groups kept in FP16, and greedy
refinement; they only call an ``evaluate(plan)`` function), ``outputs`` (the search record's files)
and ``found`` (the finished search that belongs to an FP32 export and cache, for the sign-off).
The job that runs it is ``workbench.jobs.search``.
"""
