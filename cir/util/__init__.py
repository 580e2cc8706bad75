"""Plumbing every layer uses: errors, atomic files, the run-folder lock, parallel fan-out, progress."""
