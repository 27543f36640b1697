"""One job's life: start-up checks, the job itself, and where its outputs go."""
