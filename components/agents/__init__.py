"""Tool-calling agents and the chat-generator wrappers that let a small local model call tools."""
