"""The benchmark suite (make bench); not part of the test run."""
