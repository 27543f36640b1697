"""Our Haystack components, one `@component` per file, grouped as Haystack groups its own."""
