"""scan"""
