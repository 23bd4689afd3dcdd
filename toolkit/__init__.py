"""The image toolkit: spec -> plan -> render -> engine -> gates -> report (docs/architecture.md maps its modules)."""
