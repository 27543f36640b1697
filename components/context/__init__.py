"""What reaches the prompt: the context window and the extractive compressor."""
