"""Helpers shared by the test suite and the benchmarks (shipped with the package, like
``numpy.testing``): synthetic readings and the reference transcriptions of CLIP-USER that
the compiled one is checked and timed against. Nothing here is used by the service."""
