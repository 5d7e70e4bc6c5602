"""Helpers shared by the test suite and the benchmarks, kept out of the installed package:
synthetic readings and settings, the references the compiled steps are checked and timed
against (the plain CLIP-USER transcription and its uncompiled evaluation strategies, the
plain vehicle-budget plan), the readings each released record holds (``membership``) and a
noise-free release's noise (``NoNoise``). Nothing here is used by the service."""
