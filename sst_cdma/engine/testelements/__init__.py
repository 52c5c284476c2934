"""Element library ``testElement``: small components for tests and benchmarks of the core (the
counterpart of SST-core's coreTestElement)."""
