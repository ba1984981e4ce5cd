"""Development tools shared by the tests and the benchmarks (not installed with the package)."""
