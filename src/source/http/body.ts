/**
 * A response body planned as segments (byte ranges of one open file, and in-memory bytes such as an injected
 * `<link>`), so that a Range applies to the representation actually sent, and streamed with backpressure.
 *
 * Memory: {@link streamSegments} holds one chunk of at most `chunkSize` bytes (default 64 KiB) at a time, plus
 * the in-memory segments themselves (bounded by the caller: an HTML prefix of 64 KiB at most).
 *
 * @module
 */
import type { FileHandle } from 'node:fs/promises';
import { ResourceSyncError } from '../../core/errors.js';

/** Bytes `[start, end)` of the file. */
export interface FileSegment {
  readonly kind: 'file';
  readonly start: number;
  /** Exclusive. */
  readonly end: number;
}
/** Bytes held in memory. */
export interface BytesSegment {
  readonly kind: 'bytes';
  readonly data: Uint8Array;
}
export type Segment = FileSegment | BytesSegment;

/** Total length of a body plan. */
export function segmentsLength(segments: readonly Segment[]): number {
  let n = 0;
  for (const s of segments) n += s.kind === 'file' ? s.end - s.start : s.data.length;
  return n;
}

/** The part `[start, end)` of a body plan, as a new plan. */
export function sliceSegments(segments: readonly Segment[], start: number, end: number): Segment[] {
  const out: Segment[] = [];
  let pos = 0;
  for (const s of segments) {
    const len = s.kind === 'file' ? s.end - s.start : s.data.length;
    const from = Math.max(start, pos);
    const to = Math.min(end, pos + len);
    if (from < to) {
      if (s.kind === 'file') out.push({ kind: 'file', start: s.start + (from - pos), end: s.start + (to - pos) });
      else out.push({ kind: 'bytes', data: s.data.subarray(from - pos, to - pos) });
    }
    pos += len;
  }
  return out;
}

/**
 * Reads the plan from `file` chunk by chunk. Pulling drives reading, so a slow consumer stops the reads
 * (backpressure). Throws RS_IO when the file ends early (it shrank after its length was recorded): the caller
 * then destroys the connection rather than send a short body under a Content-Length.
 */
export async function* streamSegments(
  file: FileHandle,
  segments: readonly Segment[],
  chunkSize = 64 * 1024,
): AsyncGenerator<Uint8Array, void, undefined> {
  for (const s of segments) {
    if (s.kind === 'bytes') {
      if (s.data.length > 0) yield s.data;
      continue;
    }
    let pos = s.start;
    while (pos < s.end) {
      const want = Math.min(chunkSize, s.end - pos);
      const buf = Buffer.allocUnsafe(want);
      const { bytesRead } = await file.read(buf, 0, want, pos);
      if (bytesRead === 0) throw new ResourceSyncError('RS_IO', `file ended at byte ${pos}, expected ${s.end}`);
      pos += bytesRead;
      yield bytesRead === want ? buf : buf.subarray(0, bytesRead);
    }
  }
}
