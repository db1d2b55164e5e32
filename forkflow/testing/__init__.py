"""Builders of real git repositories, shared by the tests, the benchmarks and `forkflow demo`."""
