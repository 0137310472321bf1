"""Presentation: the command line's progress line and the report's SVG pictures."""
