"""The emitter side: the vLLM plugin's event path, sinks, the local log and the load generator.

Importing this package never imports vLLM.
"""
