"""The vLLM side of the plugin: method wrappers installed at load time (no fork, no file patch).

Imported only inside vLLM processes, by :func:`emitter.plugin.register`.
"""
