"""memory_rdf benchmarks: ``python -m benchmarks`` runs the suite (:mod:`benchmarks.suite`);
the single-topic scripts run on their own (``python benchmarks/<name>.py``)."""
