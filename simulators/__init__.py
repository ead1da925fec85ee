"""lammer simulators."""
