"""Runs the reference ResourceSync simulator (resync-simulator) on Python 3.11+.

Ours, not the simulator's: the simulator calls random.sample() on a dict's keys, which Python 3.11 refuses
("Population must be a sequence"), so every update and delete event crashes its change thread and only
creations happen. This wrapper lets random.sample take a set or dict view (sorted, as Python 3.10 did
implicitly with a list of them) and then runs the simulator's own script unchanged. The simulator's
directory must be the working directory and on PYTHONPATH, the resync library too.
"""
import collections.abc
import os
import random
import runpy
import sys

_sample = random.sample


def _sample_any(population, k, **kwargs):
    if isinstance(population, (collections.abc.Set, collections.abc.KeysView)):
        population = sorted(population)
    return _sample(population, k, **kwargs)


random.sample = _sample_any
script = os.path.join(os.getcwd(), 'resync-simulator')
sys.argv = [script] + sys.argv[1:]
runpy.run_path(script, run_name='__main__')
