"""ALFWorld's built-in agent: a model-free ReAct-style player whose every failure, rescue and harm is a named mechanism."""
