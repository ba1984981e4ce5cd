"""Storage shared by the ingester, the emitter and the readers: durable writes
(:mod:`storage.durable`), the output tree's layout and file names (:mod:`storage.layout`) and
which files of a tree readers take (:mod:`storage.readable`)."""
