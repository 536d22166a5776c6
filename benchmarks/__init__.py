"""memory_rdf benchmarks: run them as scripts (``python benchmarks/<name>.py``)."""
