"""One complete window to its records: the release step's stages, the records, and the
outcome of a window whose release fails. Pure: no I/O."""
