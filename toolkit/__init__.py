"""The image toolkit: spec -> plan -> render -> engine -> gates -> report, one module per stage."""
