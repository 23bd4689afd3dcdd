"""The container engine and BuildKit behind one boundary: builds, builders, this machine's images, registries, bake."""
