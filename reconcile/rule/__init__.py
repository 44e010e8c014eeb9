"""The hold rule, pure (no I/O): settings, node views, selectors, names, decide."""
