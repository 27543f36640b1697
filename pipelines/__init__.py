"""Pipeline specs as data built into Haystack pipelines, the index, file conversion and shared errors."""
