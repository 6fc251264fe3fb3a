"""Real TextWorld games (coin collector, treasure hunter, cooking, simple, custom, or any game
file) as agentgym environments. Needs the `textworld` extra."""
