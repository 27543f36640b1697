"""File converters that keep a document's structure: HTML and PDF headings and tables as Markdown."""
