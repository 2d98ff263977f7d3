"""Lets `python3 setup.py bdist_wheel` build the wheel where there is no
pip or build frontend (the metadata is pyproject.toml's)."""

from setuptools import setup

setup()
