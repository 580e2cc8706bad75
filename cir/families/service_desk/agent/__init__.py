"""The service desk's model-free agent: beliefs, decisions, mechanisms, profiles."""
