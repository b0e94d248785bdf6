// The synthetic repository the Source benchmarks fill their stores with (store-compare.ts, source-documents.ts,
// generate-once.ts): resource `i` is `items/<i / 1024>/<i>/bitstream-<i>.pdf`, with a length, a type, MD5 and
// SHA-256 values and a lastmod derived from `i`, so every run and every store hold the same inventory.
import type { ChangeInput, SourceStore } from '../src/source/store.js';

const hex = (n: number, len: number): string => n.toString(16).padStart(len, '0').slice(-len);

/** Resource `i` of the synthetic repository, as a change of kind `change`. */
export function syntheticResource(i: number, change: ChangeInput['change'] = 'created'): ChangeInput {
  return {
    uri: `items/${hex(i >> 10, 4)}/${hex(i, 8)}/bitstream-${i}.pdf`,
    change,
    setName: 'default',
    length: 1000 + (i % 5000),
    type: 'application/pdf',
    hashes: { md5: hex(i * 2654435761, 32), 'sha-256': hex(i * 40503, 64) },
    lastmodMs: 1_700_000_000_000 + i,
  };
}

/** Records resources 0 ... `total` - 1 in `store`'s inventory (no change log), 10,000 per write. */
export async function fillInventory(store: SourceStore, total: number): Promise<void> {
  for (let start = 0; start < total; start += 10_000) {
    const batch: ChangeInput[] = [];
    for (let i = start; i < Math.min(total, start + 10_000); i++) batch.push(syntheticResource(i));
    await store.recordChanges(batch, { log: false });
  }
}
