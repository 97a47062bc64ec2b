"""crawls"""
