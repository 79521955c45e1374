"""Serving benchmark: an open-loop load generator in front of a dynamic batcher in front of the model.

``load`` makes the arrivals (Poisson, seeded), ``batcher`` decides and runs the batches (Triton-like: max
batch, max queue delay, preferred sizes, instances), ``capacity`` sweeps offered loads and finds the highest
whose p99 meets the target, ``measure`` runs a candidate behind it (load time, memory per batch),
``choose`` judges the serving gate and picks a winner by capacity. The gate file's ``[serving]`` table is
read by ``workbench.inputs.serving``.
"""
