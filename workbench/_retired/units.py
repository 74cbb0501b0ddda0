"""Retired name: see ``workbench.retired``."""

from workbench.retired import refuse

refuse(__spec__.name)
