"""The node agent: reads a GPU node with NVML and serves the report as JSON over HTTP."""
