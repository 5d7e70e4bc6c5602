"""Binary formats on the internal topics: numpy columns, window-state deltas and partials."""
