"""Static assets of the worker's web pages."""
