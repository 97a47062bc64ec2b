"""The scan's stages. Each reads and writes tables in a staging directory and runs its
heavy work through an engine's ordered `map`, so it never knows where that work runs."""
