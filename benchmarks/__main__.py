"""``python -m benchmarks``: the benchmark suite (see :mod:`benchmarks.suite`)."""

from benchmarks.suite import main

raise SystemExit(main())
