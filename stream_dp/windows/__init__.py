"""Readings to windows: validation, per-partition window state, the merge of the partitions'
partials into one window's columns, and the coordinator that says which windows are complete.
Pure (numpy, no Kafka): the offline engine and the worker both drive it."""
