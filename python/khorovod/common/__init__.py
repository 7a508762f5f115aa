"""horovod.common's import paths for scripts that use them (khorovod.common.elastic)."""
