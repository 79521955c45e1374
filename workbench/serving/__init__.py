"""Serving benchmark: an open-loop load generator in front of a dynamic batcher in front of the model.

``load`` makes the arrivals (Poisson, seeded), ``batcher`` decides and runs the batches (Triton-like: max
batch, max queue delay, preferred sizes, instances), ``capacity`` sweeps offered loads and finds the highest
whose p99 meets the target, ``model`` runs a candidate behind it (memory per batch, load time), ``settings``
reads the gate file's ``[serving]`` table and ``choose`` picks a winner by capacity.
"""
