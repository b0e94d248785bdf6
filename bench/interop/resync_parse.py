"""Reads ResourceSync documents with the reference implementation's own classes (as resync-sync does).

Ours, not the reference implementation's. Input: one JSON object per line, {"url": ..., "kind": ...} with
kind our capability name (description, capabilitylist, resourcelist, resourcedump, changelist, changedump,
resourcedump-manifest, changedump-manifest), read with the class resync-sync uses for it (an index of a
Resource List is read with its parts, as resync-sync does).
Output: one JSON object per line: {"url", "kind", "ok", "entries", "capability", "error"}.
"""
import json
import sys

from resync.capability_list import CapabilityList
from resync.change_dump import ChangeDump
from resync.change_dump_manifest import ChangeDumpManifest
from resync.change_list import ChangeList
from resync.resource_dump import ResourceDump
from resync.resource_dump_manifest import ResourceDumpManifest
from resync.resource_list import ResourceList
from resync.source_description import SourceDescription

CLASSES = {
    'description': SourceDescription,
    'capabilitylist': CapabilityList,
    'resourcelist': ResourceList,
    'resourcedump': ResourceDump,
    'changelist': ChangeList,
    'changedump': ChangeDump,
    'resourcedump-manifest': ResourceDumpManifest,
    'changedump-manifest': ChangeDumpManifest,
}

for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    req = json.loads(line)
    out = {'url': req['url'], 'kind': req['kind'], 'ok': False}
    try:
        doc = CLASSES[req['kind']]()
        doc.read(uri=req['url'])
        out['entries'] = len(doc)
        out['capability'] = doc.capability_name
        out['ok'] = True
    except Exception as e:  # report every failure, whatever its class
        out['error'] = '%s: %s' % (type(e).__name__, str(e)[:300])
    print(json.dumps(out), flush=True)
