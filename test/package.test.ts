// The published surface: every subpath export of package.json loads and carries its main entry points.
// Imports go through the package's own name (self-reference), so the `exports` map itself is what is tested.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

describe('package entry points', () => {
  const expected: Record<string, readonly string[]> = {
    resourcesync: ['openDocument', 'writeDocument', 'createValidator', 'parseDatetime', 'ResourceSyncError'],
    'resourcesync/core': ['validateDocument', 'RULES', 'createHeader', 'formatDatetime'],
    'resourcesync/xml': ['openDocument', 'readDocument', 'fileSource', 'writeSplitDocuments'],
    'resourcesync/source': ['openDirectorySource', 'createSourceServer', 'openSqliteStore'],
    'resourcesync/destination': ['Destination', 'HttpClient', 'discover', 'DestinationState'],
    'resourcesync/notify': ['WebSubPublisher', 'WebSubSubscriber', 'connectChannel'],
    'resourcesync/hub': ['createHub', 'attachSourceNotifications'],
  };
  for (const [specifier, names] of Object.entries(expected)) {
    it(`${specifier} exports ${names.join(', ')}`, async () => {
      const mod = (await import(specifier)) as Record<string, unknown>;
      for (const name of names) assert.notEqual(mod[name], undefined, `${specifier} lacks ${name}`);
    });
  }
});
