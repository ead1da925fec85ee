"""lammer daemon."""
