"""The emitter side: the vLLM plugin's event path, sinks and the load generator.

Importing this package never imports vLLM.
"""
