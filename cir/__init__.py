"""cir: causal evaluation of recovery in LLM agent harnesses.

Data flows one way: tasks -> episodes -> paired table -> statistics / policy -> router.
"""

__version__ = "0.1.0"
