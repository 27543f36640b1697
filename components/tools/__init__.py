"""Tools an agent may call, e.g. the read-only SQL query."""
