"""intra"""
