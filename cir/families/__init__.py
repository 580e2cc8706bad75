"""Environment families: everything a study needs of one environment (ALFWorld is the first)."""
