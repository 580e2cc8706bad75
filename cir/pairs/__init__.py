"""Pairs: the paired replayer, many tasks into a resumable run folder, the episode store, the run record, the paired table."""
