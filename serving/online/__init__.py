"""The online loop of a served model: its production traces and its users' feedback."""
