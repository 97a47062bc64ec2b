"""linkgraph"""
