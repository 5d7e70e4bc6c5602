"""Helpers shared by the test suite and the benchmarks (shipped with the package, like
``numpy.testing``): synthetic readings, and the references the compiled CLIP-USER is checked
and timed against (the plain transcription and the uncompiled evaluation strategies), the
readings each released record holds (``membership``) and a noise-free release's noise.
Nothing here is used by the service."""
