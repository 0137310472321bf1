"""The process's runtime: devices and their memory, stage clocks, warnings."""
