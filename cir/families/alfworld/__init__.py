"""ALFWorld: the engine adapter with exact snapshots, task generation and loading, its text, features, prompts and built-in agent."""
