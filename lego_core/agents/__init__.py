"""Agents: turn a sub-problem into candidate kernels plus a transcript.

``base.Agent`` is the interface; ``template`` is the offline template agent
(our own Triton generator).  LLM agents (a later issue) implement the same
interface.
"""
