"""lammer drivers."""
